// GradientReducer: averages a model's gradients bucket by bucket with a Communicator's
// all-reduces, while backward still runs.
//
// The buckets are those of planBuckets (bucket_plan.h), each all-reduced where it lies. As
// backward announces each layer (segmentReady), a bucket whose layers are all done goes to a
// communication thread that averages it into `averaged` while backward goes on with earlier
// layers. finishStep hands each bucket, in order, to a
// callback (the optimiser) as soon as its average is complete.
//
// With overlap off the same buckets are averaged one after another inside finishStep, on the
// calling thread, by the same collectives: the results are the same to the bit. (Give `comm` the
// same options in both modes: the mpi backend runs other MPI algorithms when it yields.)
//
// Compression: fp16 or bf16 halves the bytes on the wire. A bucket is converted to 16 bits,
// all-reduced in 16 bits with float32 arithmetic at every hop, and converted back.
//
// ZeRO-1 (options.shardUpdates): each bucket is reduce-scattered instead (Communicator::
// reduceScatter: the all-reduce's first half, the same bits in the shard), finishStep hands over
// this rank's shard of it, and parametersUpdated all-gathers the updated parameters' shards (the
// all-reduce's second half) on the same thread, queued after every reduce-scatter of the step.
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
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "collectives/aligned_buffer.h"
#include "collectives/communicator.h"
#include "base/named_values.h"
#include "base/trace_sink.h"
#include "engine/bucket_plan.h"
#include "engine/exchange_options.h"
#include "engine/gradient_exchange.h"

namespace ringtrain::engine {

class GradientReducer final : public GradientExchange {
 public:
  // `comm` is used by the reducer alone from now on (by its thread, with overlap).
  GradientReducer(collectives::Communicator& comm, std::vector<GradientSegment> segments,
                  const ExchangeOptions& options, TraceSink* trace = nullptr);
  // The same, owning `comm`.
  GradientReducer(std::unique_ptr<collectives::Communicator> comm,
                  std::vector<GradientSegment> segments, const ExchangeOptions& options,
                  TraceSink* trace = nullptr);
  ~GradientReducer() override;
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  std::span<const GradientBucket> buckets() const override { return buckets_; }
  const std::vector<GradientSegment>& segments() const { return segments_; }
  std::string describePlan() const override { return engine::describePlan(buckets_, segments_); }

  // The model's gradients, averaged out of place into a buffer of the reducer's (in place the
  // ring overwrites lines the other ranks are still reading), or in place on one rank, where
  // averaging costs nothing.
  StepBuffers hostBuffers(std::span<float> modelGradients) override;
  std::size_t bufferBytes() const override;
  // `buffers.averaged` may be `buffers.gradients`: the collectives reduce in place then.
  void beginStep(const StepBuffers& buffers) override;
  void segmentReady(int segment) override;
  void finishStep(const std::function<void(const GradientBucket&)>& onAveraged) override;
  std::vector<GradientBucket> shards() const override { return shards_; }
  void parametersUpdated(const GradientBucket& shard) override;
  void awaitParameters() override;

  // Seconds this step's finishStep waited for averages that were not ready yet (without overlap:
  // all of the all-reduces), and the seconds the all-reduces took.
  double lastWaitSeconds() const override { return lastWaitSeconds_; }
  double lastReduceSeconds() const override { return lastReduceSeconds_; }
  collectives::Communicator* communicator() const override { return &comm_; }

 private:
  // What the communication thread does with a bucket: average it, or (ZeRO-1) gather its
  // updated parameters.
  struct Job {
    int bucket = 0;
    bool gather = false;
  };
  collectives::DataType wireType() const;
  void reduce(const GradientBucket& bucket);
  // The all-reduce, or with sharding its first half.
  void average(const void* send, void* recv, std::size_t count, collectives::DataType type);
  template <class Wire>
  void averageCompressed(const GradientBucket& bucket, const float* in, float* out);
  void gather(const GradientBucket& bucket);
  void run(const Job& job);
  void communicationLoop();

  std::unique_ptr<collectives::Communicator> ownedComm_;
  collectives::Communicator& comm_;
  std::vector<GradientSegment> segments_;
  std::vector<GradientBucket> buckets_;
  std::vector<GradientBucket> shards_;  // per bucket: the part this rank updates
  std::vector<int> bucketOfSegment_;
  ExchangeOptions options_;
  TraceSink* trace_;
  std::vector<collectives::AlignedBuffer> staging_;  // per bucket, for compression
  collectives::AlignedBuffer averagedStorage_;       // hostBuffers' averages

  std::span<const float> gradients_;
  std::span<float> averaged_;
  std::span<float> parameters_;
  std::vector<int> pendingSegments_;  // per bucket: segments still to be announced this step

  std::mutex mutex_;
  std::condition_variable workReady_;
  std::condition_variable bucketDone_;
  std::deque<Job> queue_;
  std::vector<char> done_;    // per bucket, this step
  std::size_t gathered_ = 0;  // buckets whose parameters were gathered, this step
  bool stopping_ = false;
  std::exception_ptr failure_;  // an error of the communication thread, for finishStep
  double reduceSeconds_ = 0;    // accumulated by whoever reduces, under mutex_
  std::thread thread_;

  double lastWaitSeconds_ = 0;
  double lastReduceSeconds_ = 0;
};

}  // namespace ringtrain::engine
