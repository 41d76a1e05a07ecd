// StepTrace: a training step's spans on the timeline (--timeline): the batch gathered, each
// layer's forward and backward, each bucket's optimiser update; and, on the CPU, a counter sample
// per step of the milliseconds each stage of the model took (models/stage_clock.h: the products
// against the kernels between them). Without a timeline, nothing.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/gradient_exchange.h"
#include "engine/timeline.h"
#include "models/model.h"

namespace ringtrain::training {

class StepTrace {
 public:
  explicit StepTrace(engine::Timeline* timeline) : timeline_(timeline) {}
  ~StepTrace();
  StepTrace(const StepTrace&) = delete;
  StepTrace& operator=(const StepTrace&) = delete;

  // Names the spans of `model`'s layers and of `buckets`, and has the model tell this trace when
  // each layer's forward and backward begin and end (the trace must outlive the model's use).
  // `stages`: the model computes on the CPU, so its stage clock runs while this trace lives.
  void observe(models::Model<float>& model, std::span<const engine::GradientBucket> buckets,
               bool stages);
  // A step begins: the stage times so far (evaluation's) are dropped. It ends: its stage times
  // go to the timeline as one counter sample, "model stages (ms)".
  void beginStep() const;
  void endStep() const;
  // A span from `startNs` to now.
  void span(std::string_view name, std::string_view category, std::int64_t startNs) const;
  // The optimiser's update of bucket `bucket`, from `startNs` to now.
  void optimizerSpan(std::size_t bucket, std::int64_t startNs) const;

 private:
  void layerEvent(int layer, models::LayerPhase phase, bool begins);

  engine::Timeline* timeline_;
  std::vector<std::string> layerSpanNames_;  // "forward fc1", "backward fc1", ...
  std::vector<std::int64_t> layerStarts_;
  std::vector<std::string> optimizerSpanNames_;  // per bucket
  bool stages_ = false;
};

}  // namespace ringtrain::training
