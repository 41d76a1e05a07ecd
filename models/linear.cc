#include "models/linear.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "models/matrix_products.h"

namespace ringtrain::models {

template <class Scalar>
Linear<Scalar>::Linear(std::string name, Index inFeatures, Index outFeatures, Initialization init)
    : Layer<Scalar>(std::move(name), {inFeatures, 1, 1}, {outFeatures, 1, 1}),
      in_(inFeatures),
      out_(outFeatures),
      init_(init) {
  if (inFeatures < 1 || outFeatures < 1)
    throw std::invalid_argument("linear layer '" + this->name() + "': sizes must be positive");
}

template <class Scalar>
std::vector<ParameterShape> Linear<Scalar>::parameterShapes() const {
  return {{"weight", {out_, in_}}, {"bias", {out_}}};
}

template <class Scalar>
void Linear<Scalar>::initialize(SplitMix64& generator) {
  this->initializeWeightsAndZeroBiases(out_ * in_, initializationBound(init_, in_, out_),
                                       generator);
}

template <class Scalar>
double Linear<Scalar>::forwardFlopsPerSample() const {
  return 2.0 * static_cast<double>(in_) * static_cast<double>(out_);
}

template <class Scalar>
void Linear<Scalar>::forward(ConstBatchView<Scalar> x, BatchView<Scalar> y) {
  // The bias goes in first and the product adds onto it: a matrix product accumulates into its
  // destination at no cost, which saves a separate pass over y.
  y.colwise() = bias();
  product(y, weight(), x, /*accumulate=*/true);
}

template <class Scalar>
void Linear<Scalar>::backwardParameters(ConstBatchView<Scalar> x, ConstBatchView<Scalar> dy) {
  product(weightGradient(), dy, x.transpose());
  biasGradient().noalias() = dy.rowwise().sum();
}

template <class Scalar>
void Linear<Scalar>::backwardInput(ConstBatchView<Scalar> /*x*/, ConstBatchView<Scalar> /*y*/,
                                   ConstBatchView<Scalar> dy, BatchView<Scalar> dx) {
  product(dx, weight().transpose(), dy);
}

template class Linear<float>;
template class Linear<double>;

}  // namespace ringtrain::models
