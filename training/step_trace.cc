#include "training/step_trace.h"

#include <array>

#include "base/steady_clock.h"
#include "models/stage_clock.h"

namespace ringtrain::training {

StepTrace::~StepTrace() {
  if (stages_) models::enableStageClock(false);
}

void StepTrace::observe(models::Model<float>& model,
                        std::span<const engine::GradientBucket> buckets, bool stages) {
  stages_ = stages && timeline_ != nullptr;
  if (stages_) models::enableStageClock(true);
  for (int i = 0; i < model.layerCount(); ++i) {
    layerSpanNames_.push_back("forward " + model.layer(i).name());
    layerSpanNames_.push_back("backward " + model.layer(i).name());
  }
  layerStarts_.assign(layerSpanNames_.size(), 0);
  for (const engine::GradientBucket& b : buckets) {
    optimizerSpanNames_.push_back("optimizer " + b.name);
  }
  model.setLayerObserver([this](int layer, models::LayerPhase phase, bool begins) {
    layerEvent(layer, phase, begins);
  });
}

void StepTrace::layerEvent(int layer, models::LayerPhase phase, bool begins) {
  const std::size_t slot =
      2 * static_cast<std::size_t>(layer) + (phase == models::LayerPhase::kBackward ? 1 : 0);
  if (begins) {
    layerStarts_[slot] = steadyNowNs();
  } else {
    span(layerSpanNames_[slot], phase == models::LayerPhase::kForward ? "forward" : "backward",
         layerStarts_[slot]);
  }
}

void StepTrace::beginStep() const {
  if (stages_) models::takeStageTimes();
}

void StepTrace::endStep() const {
  if (!stages_) return;
  const models::StageTimes times = models::takeStageTimes();
  std::array<engine::Timeline::CounterValue, models::kStageCount> values;
  for (std::size_t s = 0; s < models::kStageCount; ++s)
    values[s] = {models::kStageNames[s].name, static_cast<double>(times.ns[s]) * 1e-6};
  timeline_->counters("model stages (ms)", steadyNowNs(), values);
}

void StepTrace::span(std::string_view name, std::string_view category, std::int64_t startNs) const {
  if (timeline_) timeline_->span(name, category, startNs, steadyNowNs());
}

void StepTrace::optimizerSpan(std::size_t bucket, std::int64_t startNs) const {
  span(optimizerSpanNames_.empty() ? std::string_view("optimizer")
                                   : std::string_view(optimizerSpanNames_[bucket]),
       "optimizer", startNs);
}

}  // namespace ringtrain::training
