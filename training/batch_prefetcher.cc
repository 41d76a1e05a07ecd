#include "training/batch_prefetcher.h"

#include <algorithm>
#include <utility>

namespace ringtrain::training {

BatchPrefetcher::BatchPrefetcher(const BatchSource& source, bool background,
                                 std::pmr::memory_resource* memory)
    : source_(source), background_(background), buffers_{HostBatch(memory), HostBatch(memory)} {
  if (background_) worker_ = std::thread([this] { work(); });
}

BatchPrefetcher::~BatchPrefetcher() {
  if (!worker_.joinable()) return;
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  worker_.join();  // after the gather in flight, if any
}

void BatchPrefetcher::work() {
  std::unique_lock lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return stop_ || job_ == Job::kQueued; });
    if (stop_) return;
    job_ = Job::kRunning;
    const std::vector<std::int64_t> indices = jobIndices_;
    HostBatch& into = buffers_[jobBuffer_];
    lock.unlock();
    std::exception_ptr error;
    try {
      gatherBatch(source_, indices, into);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    jobError_ = error;
    job_ = Job::kDone;
    changed_.notify_all();
  }
}

bool BatchPrefetcher::waitForJob(std::unique_lock<std::mutex>& lock) {
  if (job_ == Job::kNone) return false;
  changed_.wait(lock, [&] { return job_ == Job::kDone; });
  return true;
}

HostBatch& BatchPrefetcher::take(std::span<const std::int64_t> indices) {
  if (background_) {
    std::unique_lock lock(mutex_);
    if (waitForJob(lock)) {
      job_ = Job::kNone;
      const bool same =
          std::equal(indices.begin(), indices.end(), jobIndices_.begin(), jobIndices_.end());
      if (same) {
        if (jobError_) std::rethrow_exception(std::exchange(jobError_, nullptr));
        ++prefetchedTakes_;
        handedOut_ = jobBuffer_;
        return buffers_[handedOut_];
      }
      jobError_ = nullptr;  // a batch nobody wants: its error does not matter either
    }
  }
  // The batch handed out last is no longer in use: either buffer may take this one.
  ++directTakes_;
  handedOut_ = 1 - handedOut_;
  gatherBatch(source_, indices, buffers_[handedOut_]);
  return buffers_[handedOut_];
}

void BatchPrefetcher::prefetch(std::span<const std::int64_t> indices) {
  if (!background_ || indices.empty()) return;
  {
    std::unique_lock lock(mutex_);
    waitForJob(lock);  // a batch prefetched and never taken is dropped
    jobIndices_.assign(indices.begin(), indices.end());
    jobBuffer_ = 1 - handedOut_;
    jobError_ = nullptr;
    job_ = Job::kQueued;
  }
  changed_.notify_all();
}

}  // namespace ringtrain::training
