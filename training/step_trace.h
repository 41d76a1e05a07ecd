// StepTrace: a training step's spans on the timeline (--timeline): the batch gathered, each
// layer's forward and backward, each bucket's optimiser update. Without a timeline, nothing.
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

  // Names the spans of `model`'s layers and of `buckets`, and has the model tell this trace when
  // each layer's forward and backward begin and end (the trace must outlive the model's use).
  void observe(models::Model<float>& model, std::span<const engine::GradientBucket> buckets);
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
};

}  // namespace ringtrain::training
