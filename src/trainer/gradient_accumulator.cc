#include "src/trainer/gradient_accumulator.h"

#include <stdexcept>

namespace ringtrain {

GradientAccumulator::GradientAccumulator(std::size_t parameters, std::int64_t batchSize)
    : sum_(parameters), batchSize_(batchSize) {
  if (batchSize < 1) throw std::invalid_argument("GradientAccumulator: batch size below 1");
}

void GradientAccumulator::beginMicroBatch(int index, std::int64_t samples, bool last) {
  if (index == 0 && last) throw std::logic_error("GradientAccumulator: a step of one micro-batch");
  first_ = index == 0;
  stepSamples_ = (first_ ? 0 : stepSamples_) + samples;
  last_ = last;
  const auto b = static_cast<double>(batchSize_);
  weight_ = static_cast<float>(static_cast<double>(samples) / b);
  scale_ = static_cast<float>(b / static_cast<double>(stepSamples_));
}

void GradientAccumulator::layerReady(std::span<float> gradients, std::size_t offset,
                                     std::size_t count) {
  float* g = gradients.data() + offset;
  float* sum = sum_.data() + offset;
  if (last_) {
    for (std::size_t i = 0; i < count; ++i)
      g[i] = (weight_ * g[i] + sum[i]) * scale_;
  } else if (first_) {
    for (std::size_t i = 0; i < count; ++i)
      sum[i] = weight_ * g[i];
  } else {
    for (std::size_t i = 0; i < count; ++i)
      sum[i] += weight_ * g[i];
  }
}

}  // namespace ringtrain
