// GradientExchange: what the training loop needs from whatever averages its gradients across
// ranks: a bucket plan, "this layer's gradients are final", and "hand me each bucket's average".
//
// GradientReducer (gradient_reducer.h) does it with a Communicator's all-reduces, on any backend;
// SharedGradientReducer (shared_gradient_reducer.h) with memory shared by the ranks of one node.
// The training loop drives both alike, once per step:
//   beginStep(gradients, averaged); backward, calling segmentReady for each layer;
//   finishStep(onAveraged), which hands every bucket's average to onAveraged, in order.
#pragma once

#include <cstddef>
#include <functional>
#include <span>
#include <string>

namespace ringtrain::collectives {

struct GradientBucket;

class GradientExchange {
 public:
  virtual ~GradientExchange() = default;

  virtual std::span<const GradientBucket> buckets() const = 0;
  // "bucket 0: 263178 float32 at 406528 (fc2.weight .. fc3.bias)", one line per bucket: what
  // ranks compare at start-up.
  virtual std::string describePlan() const = 0;

  // Starts a step: backward writes `gradients`, the averages go to `averaged`.
  virtual void beginStep(std::span<const float> gradients, std::span<float> averaged) = 0;
  // Backward's announcement that segment `segment`'s gradients are final.
  virtual void segmentReady(int segment) = 0;
  // Finer announcements, for an exchange that wantsProgress(): every gradient at a flat offset
  // >= `offset` is final (offsets decrease through backward).
  virtual bool wantsProgress() const { return false; }
  virtual void gradientsFinalFrom(std::size_t /*offset*/) {}
  // Calls onAveraged for every bucket in order, each as soon as its average is complete, and
  // returns when all are done. An exchange may hand a bucket over in parts, as they are averaged:
  // a call then carries the bucket's index and name with a narrower offset and count; the parts
  // of a bucket come from its end to its start and cover it exactly once, before the next bucket.
  virtual void finishStep(const std::function<void(const GradientBucket&)>& onAveraged) = 0;

  // Seconds of this step's finishStep that went to averaging rather than to onAveraged (the
  // part not hidden behind computation), and the seconds the averaging took in all.
  virtual double lastWaitSeconds() const = 0;
  virtual double lastReduceSeconds() const = 0;
};

}  // namespace ringtrain::collectives
