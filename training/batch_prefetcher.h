// BatchPrefetcher: gathers the next step's batch on a thread of its own while this step trains,
// one batch ahead, as a DataLoader with a worker does.
//
// The training loop takes each step's batch with take(indices) and then names the next step's
// indices with prefetch() (ShardedSampler::peek(): the sampler itself does not move, so
// checkpoints and resume see the same positions with and without prefetching). take() hands out
// the prefetched batch when it was gathered for the same indices, waiting for the gather to end,
// and otherwise gathers now, on the calling thread: the bytes are the same either way, only where
// the time goes differs. Two buffers alternate; the batch take() returned stays valid, and
// untouched by the background thread, until the next take(). An exception of a background gather
// (a read error of an HDF5 file, say) is rethrown by the take() that wanted that batch.
//
// Without `background` nothing runs beside the caller: take() gathers, prefetch() does nothing.
// That is what suits one core per rank with the data in memory, where a second thread can only
// take time from the model.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory_resource>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "training/batch_source.h"

namespace ringtrain::training {

class BatchPrefetcher {
 public:
  // The two buffers' memory comes from `memory`.
  BatchPrefetcher(const BatchSource& source, bool background,
                  std::pmr::memory_resource* memory = std::pmr::get_default_resource());
  ~BatchPrefetcher();
  BatchPrefetcher(const BatchPrefetcher&) = delete;
  BatchPrefetcher& operator=(const BatchPrefetcher&) = delete;

  bool background() const { return background_; }
  // The batch of `indices`: prefetched, or gathered now.
  HostBatch& take(std::span<const std::int64_t> indices);
  // Starts gathering `indices` (copied) in the background; empty: nothing to start.
  void prefetch(std::span<const std::int64_t> indices);

  // Batches take() found prefetched, and batches it gathered itself.
  std::int64_t prefetchedTakes() const { return prefetchedTakes_; }
  std::int64_t directTakes() const { return directTakes_; }

 private:
  void work();
  // Waits for the job in flight, if any, to end; returns whether there was one.
  bool waitForJob(std::unique_lock<std::mutex>& lock);

  const BatchSource& source_;
  const bool background_;
  HostBatch buffers_[2];
  int handedOut_ = 1;  // the buffer take() returned last

  // The job: gather jobIndices_ into buffers_[jobBuffer_]. Guarded by mutex_.
  std::mutex mutex_;
  std::condition_variable changed_;
  enum class Job { kNone, kQueued, kRunning, kDone } job_ = Job::kNone;
  std::vector<std::int64_t> jobIndices_;
  int jobBuffer_ = 0;
  std::exception_ptr jobError_;
  bool stop_ = false;

  std::int64_t prefetchedTakes_ = 0;
  std::int64_t directTakes_ = 0;
  std::thread worker_;  // last: started once everything above exists
};

}  // namespace ringtrain::training
