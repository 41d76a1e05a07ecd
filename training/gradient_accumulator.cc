#include "training/gradient_accumulator.h"

#include <stdexcept>

namespace ringtrain::training {

GradientAccumulator::GradientAccumulator(std::size_t parameters, std::int64_t batchSize)
    : parameters_(parameters), batchSize_(batchSize) {
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

AccumulateRule GradientAccumulator::rule() const {
  const AccumulatePhase phase = last_    ? AccumulatePhase::kFinish
                                : first_ ? AccumulatePhase::kStart
                                         : AccumulatePhase::kAdd;
  return {phase, weight_, scale_};
}

void GradientAccumulator::layerReady(std::span<float> gradients, std::size_t offset,
                                     std::size_t count) {
  if (sum_.empty()) sum_.resize(parameters_);
  float* g = gradients.data() + offset;
  float* sum = sum_.data() + offset;
  const AccumulateRule r = rule();
  switch (r.phase) {
    case AccumulatePhase::kStart:
      for (std::size_t i = 0; i < count; ++i)
        sum[i] = r.weight * g[i];
      break;
    case AccumulatePhase::kAdd:
      for (std::size_t i = 0; i < count; ++i)
        sum[i] += r.weight * g[i];
      break;
    case AccumulatePhase::kFinish:
      for (std::size_t i = 0; i < count; ++i)
        g[i] = (r.weight * g[i] + sum[i]) * r.scale;
      break;
  }
}

}  // namespace ringtrain::training
