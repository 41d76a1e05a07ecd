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
  for (const GradientBucket& b : buckets_) {
    pendingSegments_[b.index] = b.lastSegment - b.firstSegment + 1;
  }
  const std::lock_guard lock(mutex_);
  std::fill(done_.begin(), done_.end(), 0);
  queue_.clear();
  reduceSeconds_ = 0;
  failure_ = nullptr;
}

void GradientReducer::segmentReady(int segment) {
  const int bucket = bucketOfSegment_.at(static_cast<std::size_t>(segment));
  if (--pendingSegments_[bucket] != 0 || !options_.overlap) return;
  {
    const std::lock_guard lock(mutex_);
    queue_.push_back(bucket);
  }
  workReady_.notify_one();
}

void GradientReducer::reduce(const GradientBucket& bucket) {
  const std::int64_t start = steadyNowNs();
  const float* in = gradients_.data() + bucket.offset;
  float* out = averaged_.data() + bucket.offset;
  const ReduceOp op = options_.reduction == Reduction::kSum ? ReduceOp::kSum : ReduceOp::kAverage;
  switch (options_.compression) {
    case Compression::kNone:
      comm_.allreduce(in, out, bucket.count, DataType::kFloat32, op);
      break;
    case Compression::kFloat16: {
      auto* wire = reinterpret_cast<Float16*>(staging_[bucket.index].data());
      collectives::convertFromFloat(in, wire, bucket.count);
      comm_.allreduce(wire, wire, bucket.count, DataType::kFloat16, op);
      collectives::convertToFloat(wire, out, bucket.count);
      break;
    }
    case Compression::kBFloat16: {
      auto* wire = reinterpret_cast<BFloat16*>(staging_[bucket.index].data());
      collectives::convertFromFloat(in, wire, bucket.count);
      comm_.allreduce(wire, wire, bucket.count, DataType::kBFloat16, op);
      collectives::convertToFloat(wire, out, bucket.count);
      break;
    }
  }
  const std::int64_t end = steadyNowNs();
  if (trace_) {
    const std::size_t bytes = bucket.count * (options_.compression == Compression::kNone ? 4 : 2);
    trace_->span(bucket.name, "all-reduce", start, end, static_cast<std::int64_t>(bytes),
                 comm_.backendName());
  }
  const std::lock_guard lock(mutex_);
  reduceSeconds_ += static_cast<double>(end - start) * 1e-9;
}

void GradientReducer::communicationLoop() {
  for (;;) {
    int bucket = 0;
    bool failed = false;
    {
      std::unique_lock lock(mutex_);
      workReady_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      bucket = queue_.front();
      queue_.pop_front();
      failed = failure_ != nullptr;
    }
    // After a failure no further collective is started: every rank failed at the same one (a
    // disagreement is reported on all of them), so all of them stop at the same point, and none
    // is left alone inside a collective the others abandoned.
    try {
      if (!failed) reduce(buckets_[static_cast<std::size_t>(bucket)]);
    } catch (...) {
      // Hand the error (ranks that disagree, say) to finishStep on the main thread.
      const std::lock_guard lock(mutex_);
      failure_ = std::current_exception();
    }
    {
      const std::lock_guard lock(mutex_);
      done_[static_cast<std::size_t>(bucket)] = 1;
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
    onAveraged(b);
  }
  const std::lock_guard lock(mutex_);
  lastReduceSeconds_ = reduceSeconds_;
  lastWaitSeconds_ = options_.overlap ? waited : reduceSeconds_;
}

}  // namespace ringtrain::engine
