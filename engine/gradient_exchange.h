// GradientExchange: what the training loop needs from whatever averages its gradients across
// ranks: a bucket plan, "this layer's gradients are final", and "hand me each bucket's average".
//
// makeGradientExchange (exchange_factory.h) builds one for a backend; the training loop sees
// only this interface and drives every exchange alike, once per step:
//   beginStep(buffers); backward, calling segmentReady for each layer;
//   finishStep(onAveraged), which hands every bucket's average to onAveraged, in order.
#pragma once

#include <cstddef>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "collectives/communicator.h"
#include "engine/bucket_plan.h"

namespace ringtrain::engine {

// What an exchange leaves of the ranks' gradients: their mean (training's), or their sum (a
// library caller's choice: ringtrain::GradientExchange with ReduceOp::kSum).
enum class Reduction { kAverage, kSum };

// One step's buffers: backward writes `gradients`, the exchange writes their average into
// `averaged` (which may be `gradients` itself: averaged in place). `parameters`: the model's,
// where a sharding exchange (ExchangeOptions::shardUpdates) gathers the updated shards.
struct StepBuffers {
  std::span<float> gradients;
  std::span<float> averaged;
  std::span<float> parameters{};
};

class GradientExchange {
 public:
  virtual ~GradientExchange() = default;

  virtual std::span<const GradientBucket> buckets() const = 0;
  // One line per bucket (describePlan in bucket_plan.h): what ranks compare at start-up.
  virtual std::string describePlan() const = 0;

  // The host buffers of a model whose own gradient buffer is `modelGradients`. The exchange owns
  // whatever memory they need: the averages' buffer, and for an exchange that must see the
  // gradients where backward writes them (shm) the gradients' too; the caller then keeps its
  // gradients in the returned `gradients`. Valid for the exchange's lifetime. A device model
  // brings its own StepBuffers instead.
  virtual StepBuffers hostBuffers(std::span<float> modelGradients) = 0;

  // Bytes of host memory the exchange holds beside the StepBuffers it hands out (compression's
  // staging, the rest of a shared window), for the memory report; the communicators' own scratch
  // (a ring's landing slots, a few MiB) is not counted.
  virtual std::size_t bufferBytes() const { return 0; }

  // Starts a step on `buffers` (the same every step).
  virtual void beginStep(const StepBuffers& buffers) = 0;
  // Backward's announcement that segment `segment`'s gradients are final.
  virtual void segmentReady(int segment) = 0;
  // Calls onAveraged for every bucket in order, each as soon as its average is complete, and
  // returns when all are done. An exchange may hand a bucket over in parts, as they are averaged:
  // a call then carries the bucket's index and name with a narrower offset and count; the parts
  // of a bucket come from its end to its start and cover it exactly once, before the next bucket.
  virtual void finishStep(const std::function<void(const GradientBucket&)>& onAveraged) = 0;

  // ZeRO-1 (ExchangeOptions::shardUpdates): each rank updates one shard of every bucket. The
  // parts of the buckets this rank's finishStep hands over and whose parameters it updates, in
  // bucket order: every bucket whole, or with sharding one shard of each (possibly empty), in one
  // call each. Once the caller has updated a shard's parameters, parametersUpdated(shard) shares
  // them with the other ranks (every rank calls it once per bucket, in bucket order, after
  // finishStep has handed that bucket over); awaitParameters() returns when every bucket's
  // parameters are whole again on every rank. Without sharding both do nothing.
  virtual std::vector<GradientBucket> shards() const {
    return {buckets().begin(), buckets().end()};
  }
  virtual void parametersUpdated(const GradientBucket& /*shard*/) {}
  virtual void awaitParameters() {}

  // Seconds of this step's finishStep that went to averaging rather than to onAveraged (the
  // part not hidden behind computation), and the seconds the averaging took in all.
  virtual double lastWaitSeconds() const = 0;
  virtual double lastReduceSeconds() const = 0;

  // The communicator the gradients travel on (the stall watchdog watches it; a device model
  // orders its stream before it), or null for an exchange that sends no messages.
  virtual collectives::Communicator* communicator() const = 0;
};

}  // namespace ringtrain::engine
