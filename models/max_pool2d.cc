#include "models/max_pool2d.h"

#include <limits>
#include <stdexcept>
#include <utility>

#include "base/vector_dispatch.h"

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

// The windows of one sample (channels last: a window position is `channels` contiguous values,
// at sample[start + w] for w in `window`, window[0] == 0). For each window and channel, the
// largest value and its offset in the sample, the first in the window on ties: kept in registers
// across the window and stored once.
template <class Scalar>
RINGTRAIN_VECTOR_CLONES void poolSample(const Scalar* __restrict sample, SampleShape in,
                                        SampleShape out, Index stride,
                                        const std::vector<std::int32_t>& window,
                                        Scalar* __restrict best, std::int32_t* __restrict winner) {
  // 32-bit lanes throughout (offsets fit, see pooledShape), so that each vector holds as many
  // indices as values.
  const auto c = static_cast<std::int32_t>(in.channels);
  const std::int32_t* offsets = window.data();
  const std::size_t positions = window.size();
  for (Index ho = 0; ho < out.height; ++ho) {
    for (Index wo = 0; wo < out.width; ++wo, best += c, winner += c) {
      const auto start = static_cast<std::int32_t>((ho * stride * in.width + wo * stride) * c);
#pragma omp simd
      for (std::int32_t k = 0; k < c; ++k) {
        std::int32_t at = start + k;
        Scalar top = sample[at];
        for (std::size_t p = 1; p < positions; ++p) {
          const std::int32_t candidate = start + offsets[p] + k;
          const bool larger = sample[candidate] > top;
          top = larger ? sample[candidate] : top;
          at = larger ? candidate : at;
        }
        best[k] = top;
        winner[k] = at;
      }
    }
  }
}

}  // namespace

template <class Scalar>
MaxPool2d<Scalar>::MaxPool2d(std::string name, SampleShape input, Index kernel, Index stride)
    : Layer<Scalar>(name, input, pooledShape(name, input, kernel, stride == 0 ? kernel : stride)),
      kernel_(kernel),
      stride_(stride == 0 ? kernel : stride) {
  for (Index i = 0; i < kernel_; ++i)
    for (Index j = 0; j < kernel_; ++j)
      window_.push_back(static_cast<std::int32_t>((i * input.width + j) * input.channels));
}

template <class Scalar>
void MaxPool2d<Scalar>::reserve(Index batch) {
  const auto needed = static_cast<std::size_t>(batch * this->outputShape().size());
  if (winners_.size() < needed) winners_.resize(needed);
}

template <class Scalar>
void MaxPool2d<Scalar>::forward(ConstBatchView<Scalar> x, BatchView<Scalar> y) {
  const SampleShape in = this->inputShape();
  const SampleShape out = this->outputShape();
  reserve(x.cols());
  for (Index b = 0; b < x.cols(); ++b) {
    poolSample(x.data() + b * in.size(), in, out, stride_, window_, y.data() + b * out.size(),
               winners_.data() + b * out.size());
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
