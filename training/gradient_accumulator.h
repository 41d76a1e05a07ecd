// GradientAccumulator: --accumulate-steps K, the gradients of K micro-batches made into one
// optimiser step's, without holding back the exchange.
//
// A micro-batch's loss is the mean over its n_k samples, so the gradient of the step's mean loss
// over N = n_0 + ... + n_{K-1} samples is sum_k (n_k / N) g_k. Backward of every micro-batch but
// the last hands each layer's gradients here as they become final and they are added into a sum
// of their own, weighted by n_k / B (B the full micro-batch: 1, a plain sum, but for an epoch's
// last, smaller batch). Backward of the last micro-batch has each layer's gradients replaced by
// the step's mean just before the layer is announced to the exchange, so that the averaging
// across ranks still runs while backward goes on, and communicates once per step.
//
// The host path applies the rule here (layerReady); the GPU path applies rule() with its own
// kernels to a sum on the device (GpuReplica::accumulate), so the arithmetic is the same.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace ringtrain::training {

// What a micro-batch's gradients g do to the step's: kStart: sum = weight * g; kAdd:
// sum += weight * g; kFinish (the last micro-batch): g = (weight * g + sum) * scale.
enum class AccumulatePhase { kStart, kAdd, kFinish };
struct AccumulateRule {
  AccumulatePhase phase = AccumulatePhase::kStart;
  float weight = 1;
  float scale = 1;
};

class GradientAccumulator {
 public:
  // `parameters`: the length of the flat gradient buffer; `batchSize`: a full micro-batch's
  // samples. The host sum is allocated by the first layerReady (never on the GPU path).
  GradientAccumulator(std::size_t parameters, std::int64_t batchSize);

  // Before backward of micro-batch `index` (from 0) of a step, of `samples` samples; `last`: the
  // step's last (never the first: K >= 2), whose gradients become the step's.
  void beginMicroBatch(int index, std::int64_t samples, bool last);
  // The current micro-batch's rule.
  AccumulateRule rule() const;
  // Backward has made `gradients`[offset, offset + count) final (a layer of the flat buffer):
  // kept, or for the last micro-batch replaced by the step's mean gradient.
  void layerReady(std::span<float> gradients, std::size_t offset, std::size_t count);

 private:
  std::size_t parameters_;
  std::vector<float> sum_;  // sum over the step's earlier micro-batches of (n_k / B) g_k
  std::int64_t batchSize_;
  std::int64_t stepSamples_ = 0;  // the step's so far, the current micro-batch's included
  bool first_ = true;             // the current micro-batch starts the sum
  bool last_ = false;
  float weight_ = 1;  // the current micro-batch's n_k / B
  float scale_ = 1;   // B / N, for the last micro-batch
};

}  // namespace ringtrain::training
