// GradientReducer: averages a model's gradients bucket by bucket, while backward still runs.
//
// The model's gradients live in one flat buffer, layer after layer in forward order. Backward
// finishes them from the last layer to the first, so the reducer cuts the buffer into buckets of
// adjacent layers in reverse order, each at most `fusionThresholdBytes` (a layer larger than that
// is a bucket of its own): a bucket is a contiguous range, so it is all-reduced where it lies,
// without a copy into a fusion buffer. As backward announces each layer (segmentReady), a bucket
// whose layers are all done goes to a communication thread that averages it into `averaged`
// while backward goes on with earlier layers. finishStep hands each bucket, in order, to a
// callback (the optimiser) as soon as its average is complete.
//
// With overlap off the same buckets are averaged one after another inside finishStep, on the
// calling thread, by the same collectives: the results are the same to the bit. (Give `comm` the
// same options in both modes: the mpi backend runs other MPI algorithms when it yields.)
//
// Compression: fp16 or bf16 halves the bytes on the wire. A bucket is converted to 16 bits,
// all-reduced in 16 bits with float32 arithmetic at every hop, and converted back.
//
// Every rank must announce the same layers in the same order (backward does), so that every
// rank's communication thread issues the same collectives in the same order; the communicator is
// used by that thread alone during a step.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "collectives/aligned_buffer.h"
#include "collectives/communicator.h"
#include "collectives/gradient_exchange.h"
#include "collectives/trace_sink.h"

namespace ringtrain::collectives {

// One layer's slice of the flat gradient buffer.
struct GradientSegment {
  std::string name;
  std::size_t offset = 0;  // elements
  std::size_t count = 0;
};

// A contiguous range of the gradient buffer, all-reduced as one collective. Segments
// [firstSegment, lastSegment] (forward order) make it up.
struct GradientBucket {
  int index = 0;  // 0 is the last layers', reduced first
  std::size_t offset = 0;
  std::size_t count = 0;
  int firstSegment = 0;
  int lastSegment = 0;
  std::string name;  // "bucket 0 (fc3.weight .. fc2.bias)"
};

enum class Compression { kNone, kFloat16, kBFloat16 };
std::string_view name(Compression compression);

// Buckets in reverse segment order, each at most thresholdBytes of float32.
std::vector<GradientBucket> planBuckets(std::span<const GradientSegment> segments,
                                        std::size_t thresholdBytes);
// One line per bucket: "bucket 0: 263178 float32 at 406528 (fc2.weight .. fc3.bias)".
std::string describePlan(std::span<const GradientBucket> buckets,
                         std::span<const GradientSegment> segments);

struct ReducerOptions {
  std::size_t fusionThresholdBytes = 4 << 20;
  bool overlap = true;
  Compression compression = Compression::kNone;
};

class GradientReducer final : public GradientExchange {
 public:
  // `comm` is used by the reducer alone from now on (by its thread, with overlap).
  GradientReducer(Communicator& comm, std::vector<GradientSegment> segments,
                  const ReducerOptions& options, TraceSink* trace = nullptr);
  ~GradientReducer() override;
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  std::span<const GradientBucket> buckets() const override { return buckets_; }
  const std::vector<GradientSegment>& segments() const { return segments_; }
  std::string describePlan() const override {
    return collectives::describePlan(buckets_, segments_);
  }

  // `averaged` may be `gradients` itself: the collectives reduce in place then.
  void beginStep(std::span<const float> gradients, std::span<float> averaged) override;
  void segmentReady(int segment) override;
  void finishStep(const std::function<void(const GradientBucket&)>& onAveraged) override;

  // Seconds this step's finishStep waited for averages that were not ready yet (without overlap:
  // all of the all-reduces), and the seconds the all-reduces took.
  double lastWaitSeconds() const override { return lastWaitSeconds_; }
  double lastReduceSeconds() const override { return lastReduceSeconds_; }

 private:
  void reduce(const GradientBucket& bucket);
  void communicationLoop();

  Communicator& comm_;
  std::vector<GradientSegment> segments_;
  std::vector<GradientBucket> buckets_;
  std::vector<int> bucketOfSegment_;
  ReducerOptions options_;
  TraceSink* trace_;
  std::vector<AlignedBuffer> staging_;  // per bucket, for compression

  std::span<const float> gradients_;
  std::span<float> averaged_;
  std::vector<int> pendingSegments_;  // per bucket: segments still to be announced this step

  std::mutex mutex_;
  std::condition_variable workReady_;
  std::condition_variable bucketDone_;
  std::deque<int> queue_;
  std::vector<char> done_;  // per bucket, this step
  bool stopping_ = false;
  std::exception_ptr failure_;  // an error of the communication thread, for finishStep
  double reduceSeconds_ = 0;    // accumulated by whoever reduces, under mutex_
  std::thread thread_;

  double lastWaitSeconds_ = 0;
  double lastReduceSeconds_ = 0;
};

}  // namespace ringtrain::collectives
