#include "models/max_pool2d.h"

#include <limits>
#include <stdexcept>
#include <utility>

namespace ringtrain::models {
namespace {

SampleShape pooledShape(const std::string& name, SampleShape input, Index kernel, Index stride) {
  if (kernel < 1 || stride < 1 || input.height < kernel || input.width < kernel)
    throw std::invalid_argument("max_pool2d layer '" + name + "': a " + std::to_string(kernel) +
                                "x" + std::to_string(kernel) + " window does not fit a " +
                                toString(input) + " input");
  if (input.size() > std::numeric_limits<std::int32_t>::max())
    throw std::invalid_argument("max_pool2d layer '" + name + "': input too large");
  return {input.channels, (input.height - kernel) / stride + 1,
          (input.width - kernel) / stride + 1};
}

}  // namespace

template <class Scalar>
MaxPool2d<Scalar>::MaxPool2d(std::string name, SampleShape input, Index kernel, Index stride)
    : Layer<Scalar>(name, input, pooledShape(name, input, kernel, stride == 0 ? kernel : stride)),
      kernel_(kernel),
      stride_(stride == 0 ? kernel : stride) {}

template <class Scalar>
void MaxPool2d<Scalar>::reserve(Index batch) {
  const auto needed = static_cast<std::size_t>(batch * this->outputShape().size());
  if (winners_.size() < needed) winners_.resize(needed);
}

template <class Scalar>
void MaxPool2d<Scalar>::forward(ConstBatchView<Scalar> x, BatchView<Scalar> y) {
  const SampleShape in = this->inputShape();
  const SampleShape out = this->outputShape();
  const Index c = in.channels;
  reserve(x.cols());
  for (Index b = 0; b < x.cols(); ++b) {
    const Scalar* sample = x.data() + b * in.size();
    for (Index ho = 0; ho < out.height; ++ho) {
      for (Index wo = 0; wo < out.width; ++wo) {
        const Index o = b * out.size() + (ho * out.width + wo) * c;
        Scalar* best = y.data() + o;
        std::int32_t* winner = winners_.data() + o;
        // Channels are last, so each window position is c contiguous values: the comparisons
        // run across channels, one vector at a time.
        for (Index i = 0; i < kernel_; ++i) {
          for (Index j = 0; j < kernel_; ++j) {
            const Index offset = ((ho * stride_ + i) * in.width + wo * stride_ + j) * c;
            const Scalar* candidate = sample + offset;
            const bool firstInWindow = i == 0 && j == 0;
#pragma omp simd
            for (Index k = 0; k < c; ++k) {
              if (firstInWindow || candidate[k] > best[k]) {
                best[k] = candidate[k];
                winner[k] = static_cast<std::int32_t>(offset + k);
              }
            }
          }
        }
      }
    }
  }
}

template <class Scalar>
void MaxPool2d<Scalar>::backwardInput(ConstBatchView<Scalar> /*x*/, ConstBatchView<Scalar> /*y*/,
                                      ConstBatchView<Scalar> dy, BatchView<Scalar> dx) {
  const Index inSize = this->inputShape().size();
  const Index outSize = this->outputShape().size();
  dx.setZero();
  // += because overlapping windows (stride < kernel) can pick the same input more than once.
  for (Index b = 0; b < dy.cols(); ++b) {
    Scalar* gradIn = dx.data() + b * inSize;
    const Scalar* gradOut = dy.data() + b * outSize;
    const std::int32_t* winner = winners_.data() + b * outSize;
    for (Index o = 0; o < outSize; ++o)
      gradIn[winner[o]] += gradOut[o];
  }
}

template class MaxPool2d<float>;
template class MaxPool2d<double>;

}  // namespace ringtrain::models
