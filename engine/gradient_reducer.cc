#include "engine/gradient_reducer.h"

#include <exception>
#include <stdexcept>

#include "collectives/float16.h"
#include "base/steady_clock.h"

namespace ringtrain::engine {

using collectives::BFloat16;
using collectives::DataType;
using collectives::Float16;
using collectives::ReduceOp;

std::string_view name(Compression compression) {
  return nameIn(kCompressionNames, compression);
}

GradientReducer::GradientReducer(std::unique_ptr<collectives::Communicator> comm,
                                 std::vector<GradientSegment> segments,
                                 const ExchangeOptions& options, TraceSink* trace)
    : GradientReducer(*comm, std::move(segments), options, trace) {
  ownedComm_ = std::move(comm);
}

GradientReducer::GradientReducer(collectives::Communicator& comm,
                                 std::vector<GradientSegment> segments,
                                 const ExchangeOptions& options, TraceSink* trace)
    : comm_(comm),
      segments_(std::move(segments)),
      buckets_(planBuckets(segments_, options.fusionThresholdBytes)),
      bucketOfSegment_(segments_.size(), 0),
      options_(options),
      trace_(trace),
      pendingSegments_(buckets_.size(), 0),
      done_(buckets_.size(), 0) {
  for (const GradientBucket& b : buckets_) {
    for (int s = b.firstSegment; s <= b.lastSegment; ++s) {
      bucketOfSegment_[static_cast<std::size_t>(s)] = b.index;
    }
  }
  if (options_.shardUpdates && !comm_.splitsAllreduce()) {
    throw std::invalid_argument("backend " + std::string(comm_.backendName()) +
                                " cannot shard the optimiser (it does not split its all-reduce)");
  }
  shards_ = buckets_;
  if (options_.shardUpdates) {
    for (GradientBucket& shard : shards_) {
      const collectives::ElementRange mine = comm_.shardOf(shard.count, wireType());
      shard.offset += mine.begin;
      shard.count = mine.size();
    }
  }
  if (options_.compression != Compression::kNone) {
    staging_.resize(buckets_.size());
    for (const GradientBucket& b : buckets_)
      staging_[b.index].resize(b.count * 2);
  }
  if (options_.overlap) thread_ = std::thread([this] { communicationLoop(); });
}

GradientReducer::~GradientReducer() {
  {
    const std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  workReady_.notify_all();
  if (thread_.joinable()) thread_.join();
}

StepBuffers GradientReducer::hostBuffers(std::span<float> modelGradients) {
  if (comm_.size() == 1) return {modelGradients, modelGradients};
  averagedStorage_.resize(modelGradients.size_bytes());
  return {modelGradients,
          {reinterpret_cast<float*>(averagedStorage_.data()), modelGradients.size()}};
}

std::size_t GradientReducer::bufferBytes() const {
  std::size_t bytes = 0;
  for (const collectives::AlignedBuffer& staging : staging_)
    bytes += staging.size();
  return bytes;
}

void GradientReducer::beginStep(const StepBuffers& buffers) {
  gradients_ = buffers.gradients;
  averaged_ = buffers.averaged;
  parameters_ = buffers.parameters;
  if (options_.shardUpdates && parameters_.size() != gradients_.size()) {
    throw std::logic_error("beginStep: a sharding exchange needs the model's parameters");
  }
  for (const GradientBucket& b : buckets_) {
    pendingSegments_[b.index] = b.lastSegment - b.firstSegment + 1;
  }
  const std::lock_guard lock(mutex_);
  std::fill(done_.begin(), done_.end(), 0);
  gathered_ = 0;
  queue_.clear();
  reduceSeconds_ = 0;
  failure_ = nullptr;
}

void GradientReducer::segmentReady(int segment) {
  const int bucket = bucketOfSegment_.at(static_cast<std::size_t>(segment));
  if (--pendingSegments_[bucket] != 0 || !options_.overlap) return;
  {
    const std::lock_guard lock(mutex_);
    queue_.push_back({bucket, false});
  }
  workReady_.notify_one();
}

DataType GradientReducer::wireType() const {
  switch (options_.compression) {
    case Compression::kFloat16:
      return DataType::kFloat16;
    case Compression::kBFloat16:
      return DataType::kBFloat16;
    case Compression::kNone:
      break;
  }
  return DataType::kFloat32;
}

void GradientReducer::average(const void* send, void* recv, std::size_t count, DataType type) {
  const ReduceOp op = options_.reduction == Reduction::kSum ? ReduceOp::kSum : ReduceOp::kAverage;
  if (options_.shardUpdates) {
    comm_.reduceScatter(send, recv, count, type, op);
  } else {
    comm_.allreduce(send, recv, count, type, op);
  }
}

// Converted to 16 bits, averaged in 16 bits with float32 arithmetic at every hop, and the part
// this rank holds (the bucket, or its shard) converted back.
template <class Wire>
void GradientReducer::averageCompressed(const GradientBucket& bucket, const float* in, float* out) {
  auto* wire = reinterpret_cast<Wire*>(staging_[bucket.index].data());
  collectives::convertFromFloat(in, wire, bucket.count);
  average(wire, wire, bucket.count, wireType());
  const GradientBucket& mine = shards_[static_cast<std::size_t>(bucket.index)];
  const std::size_t skip = mine.offset - bucket.offset;
  collectives::convertToFloat(wire + skip, out + skip, mine.count);
}

void GradientReducer::reduce(const GradientBucket& bucket) {
  const std::int64_t start = steadyNowNs();
  const float* in = gradients_.data() + bucket.offset;
  float* out = averaged_.data() + bucket.offset;
  switch (options_.compression) {
    case Compression::kNone:
      average(in, out, bucket.count, DataType::kFloat32);
      break;
    case Compression::kFloat16:
      averageCompressed<Float16>(bucket, in, out);
      break;
    case Compression::kBFloat16:
      averageCompressed<BFloat16>(bucket, in, out);
      break;
  }
  const std::int64_t end = steadyNowNs();
  if (trace_) {
    const std::size_t bytes = bucket.count * collectives::sizeOf(wireType());
    trace_->span(bucket.name, options_.shardUpdates ? "reduce-scatter" : "all-reduce", start, end,
                 static_cast<std::int64_t>(bytes), comm_.backendName());
  }
  const std::lock_guard lock(mutex_);
  reduceSeconds_ += static_cast<double>(end - start) * 1e-9;
}

void GradientReducer::gather(const GradientBucket& bucket) {
  const std::int64_t start = steadyNowNs();
  comm_.gatherShards(parameters_.data() + bucket.offset, bucket.count, DataType::kFloat32,
                     wireType());
  const std::int64_t end = steadyNowNs();
  if (trace_) {
    trace_->span(bucket.name, "all-gather", start, end,
                 static_cast<std::int64_t>(bucket.count * sizeof(float)), comm_.backendName());
  }
  const std::lock_guard lock(mutex_);
  reduceSeconds_ += static_cast<double>(end - start) * 1e-9;
}

void GradientReducer::run(const Job& job) {
  const GradientBucket& bucket = buckets_[static_cast<std::size_t>(job.bucket)];
  if (job.gather) {
    gather(bucket);
  } else {
    reduce(bucket);
  }
}

void GradientReducer::communicationLoop() {
  for (;;) {
    Job job;
    bool failed = false;
    {
      std::unique_lock lock(mutex_);
      workReady_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      job = queue_.front();
      queue_.pop_front();
      failed = failure_ != nullptr;
    }
    // After a failure no further collective is started: every rank failed at the same one (a
    // disagreement is reported on all of them), so all of them stop at the same point, and none
    // is left alone inside a collective the others abandoned.
    try {
      if (!failed) run(job);
    } catch (...) {
      // Hand the error (ranks that disagree, say) to finishStep on the main thread.
      const std::lock_guard lock(mutex_);
      failure_ = std::current_exception();
    }
    {
      const std::lock_guard lock(mutex_);
      if (job.gather) {
        ++gathered_;
      } else {
        done_[static_cast<std::size_t>(job.bucket)] = 1;
      }
    }
    bucketDone_.notify_all();
  }
}

void GradientReducer::finishStep(const std::function<void(const GradientBucket&)>& onAveraged) {
  for (const GradientBucket& b : buckets_) {
    if (pendingSegments_[b.index] != 0) {
      throw std::logic_error("finishStep: " + b.name + " still waits for " +
                             std::to_string(pendingSegments_[b.index]) +
                             " segment(s): every segment must be announced once per step");
    }
  }
  double waited = 0;
  for (const GradientBucket& b : buckets_) {
    if (!options_.overlap) {
      reduce(b);
    } else {
      const std::int64_t start = steadyNowNs();
      {
        std::unique_lock lock(mutex_);
        bucketDone_.wait(lock, [&] { return done_[static_cast<std::size_t>(b.index)] != 0; });
        if (failure_) std::rethrow_exception(failure_);
      }
      const std::int64_t end = steadyNowNs();
      waited += static_cast<double>(end - start) * 1e-9;
      if (trace_ && end - start > 1000) trace_->span(b.name, "wait", start, end);
    }
    onAveraged(shards_[static_cast<std::size_t>(b.index)]);
  }
  const std::lock_guard lock(mutex_);
  lastReduceSeconds_ = reduceSeconds_;
  lastWaitSeconds_ = options_.overlap ? waited : reduceSeconds_;
}

void GradientReducer::parametersUpdated(const GradientBucket& shard) {
  if (!options_.shardUpdates) return;
  if (!options_.overlap) {
    gather(buckets_.at(static_cast<std::size_t>(shard.index)));
    ++gathered_;
    return;
  }
  {
    const std::lock_guard lock(mutex_);
    queue_.push_back({shard.index, true});
  }
  workReady_.notify_one();
}

void GradientReducer::awaitParameters() {
  if (!options_.shardUpdates) return;
  const std::int64_t start = steadyNowNs();
  std::unique_lock lock(mutex_);
  bucketDone_.wait(lock, [&] { return gathered_ == buckets_.size(); });
  if (failure_) std::rethrow_exception(failure_);
  lastReduceSeconds_ = reduceSeconds_;
  lastWaitSeconds_ = options_.overlap
                         ? lastWaitSeconds_ + static_cast<double>(steadyNowNs() - start) * 1e-9
                         : reduceSeconds_;
}

}  // namespace ringtrain::engine
