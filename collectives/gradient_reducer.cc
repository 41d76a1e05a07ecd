#include "collectives/gradient_reducer.h"

#include <exception>
#include <stdexcept>

#include "collectives/float16.h"

namespace ringtrain::collectives {

std::string_view name(Compression compression) {
  switch (compression) {
    case Compression::kNone:
      return "none";
    case Compression::kFloat16:
      return "fp16";
    case Compression::kBFloat16:
      return "bf16";
  }
  return "unknown";
}

std::vector<GradientBucket> planBuckets(std::span<const GradientSegment> segments,
                                        std::size_t thresholdBytes) {
  for (std::size_t i = 0; i < segments.size(); ++i) {
    if (segments[i].count == 0) {
      throw std::invalid_argument("gradient segment '" + segments[i].name + "' is empty");
    }
    if (i > 0 && segments[i].offset != segments[i - 1].offset + segments[i - 1].count) {
      throw std::invalid_argument("gradient segment '" + segments[i].name + "' does not follow '" +
                                  segments[i - 1].name +
                                  "' in the buffer: buckets must be contiguous ranges");
    }
  }
  std::vector<GradientBucket> buckets;
  int last = static_cast<int>(segments.size()) - 1;
  std::size_t bytes = 0;
  auto close = [&](int first) {
    GradientBucket b;
    b.index = static_cast<int>(buckets.size());
    b.firstSegment = first;
    b.lastSegment = last;
    b.offset = segments[static_cast<std::size_t>(first)].offset;
    const GradientSegment& end = segments[static_cast<std::size_t>(last)];
    b.count = end.offset + end.count - b.offset;
    b.name = "bucket " + std::to_string(b.index) + " (" +
             segments[static_cast<std::size_t>(first)].name +
             (first == last ? "" : " .. " + end.name) + ")";
    buckets.push_back(std::move(b));
  };
  for (int i = last; i >= 0; --i) {
    const std::size_t segmentBytes = segments[static_cast<std::size_t>(i)].count * sizeof(float);
    if (i < last && bytes + segmentBytes > thresholdBytes) {
      close(i + 1);
      last = i;
      bytes = 0;
    }
    bytes += segmentBytes;
  }
  if (!segments.empty()) close(0);
  return buckets;
}

std::string describePlan(std::span<const GradientBucket> buckets,
                         std::span<const GradientSegment> segments) {
  std::string text;
  for (const GradientBucket& b : buckets) {
    text += "bucket " + std::to_string(b.index) + ": " + std::to_string(b.count) + " float32 at " +
            std::to_string(b.offset) + " (" +
            segments[static_cast<std::size_t>(b.firstSegment)].name + " .. " +
            segments[static_cast<std::size_t>(b.lastSegment)].name + ")\n";
  }
  return text;
}

GradientReducer::GradientReducer(Communicator& comm, std::vector<GradientSegment> segments,
                                 const ReducerOptions& options, TraceSink* trace)
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

void GradientReducer::beginStep(std::span<const float> gradients, std::span<float> averaged) {
  gradients_ = gradients;
  averaged_ = averaged;
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
  switch (options_.compression) {
    case Compression::kNone:
      comm_.allreduce(in, out, bucket.count, DataType::kFloat32, ReduceOp::kAverage);
      break;
    case Compression::kFloat16: {
      auto* wire = reinterpret_cast<Float16*>(staging_[bucket.index].data());
      convertFromFloat(in, wire, bucket.count);
      comm_.allreduce(wire, wire, bucket.count, DataType::kFloat16, ReduceOp::kAverage);
      convertToFloat(wire, out, bucket.count);
      break;
    }
    case Compression::kBFloat16: {
      auto* wire = reinterpret_cast<BFloat16*>(staging_[bucket.index].data());
      convertFromFloat(in, wire, bucket.count);
      comm_.allreduce(wire, wire, bucket.count, DataType::kBFloat16, ReduceOp::kAverage);
      convertToFloat(wire, out, bucket.count);
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

}  // namespace ringtrain::collectives
