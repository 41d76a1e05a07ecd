#include "collectives/stall_watchdog.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>

#include "collectives/mpi_check.h"
#include "base/steady_clock.h"

namespace ringtrain::collectives {
namespace {

constexpr int kQueryTag = 1;
constexpr int kReplyTag = 2;
constexpr auto kPollInterval = std::chrono::milliseconds(20);
constexpr double kReplySeconds = 3.0;  // how long a stalled rank waits for the others' answers

// One watched communicator in a reply: its sequence number, whether it is inside that
// collective, and for how long it has been (milliseconds).
struct Entry {
  std::int64_t sequence;
  std::int64_t inside;
  std::int64_t sinceMs;
};

std::string listRanks(const std::vector<std::string>& items) {
  std::string text;
  const std::size_t shown = std::min<std::size_t>(items.size(), 8);
  for (std::size_t i = 0; i < shown; ++i)
    text += (i ? ", " : "") + items[i];
  if (items.size() > shown) text += " and " + std::to_string(items.size() - shown) + " more";
  return text;
}

}  // namespace

StallWatchdog::StallWatchdog(MPI_Comm world, double timeoutSeconds)
    : timeoutSeconds_(timeoutSeconds) {
  RINGTRAIN_MPI_CHECK(MPI_Comm_dup(world, &comm_));
  RINGTRAIN_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  RINGTRAIN_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  RINGTRAIN_MPI_CHECK(MPI_Comm_size(comm_, &size_));
  thread_ = std::thread([this] { run(); });
}

StallWatchdog::~StallWatchdog() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Comm_free(&comm_);
}

void StallWatchdog::watch(const Communicator& comm, std::string name) {
  const std::lock_guard lock(mutex_);
  watched_.push_back({&comm, std::move(name)});
}

void StallWatchdog::unwatch(const Communicator& comm) {
  const std::lock_guard lock(mutex_);
  std::erase_if(watched_, [&](const Watched& w) { return w.comm == &comm; });
}

double StallWatchdog::secondsInside(Watched& w, const CollectiveProgress& p, std::int64_t nowNs) {
  if (!p.inside) {
    w.seenSinceNs = -1;
    return 0;
  }
  if (w.seenSinceNs < 0 || w.seenSequence != p.sequence) {
    w.seenSequence = p.sequence;
    w.seenSinceNs = nowNs;
  }
  return static_cast<double>(nowNs - w.seenSinceNs) * 1e-9;
}

void StallWatchdog::answerQueries() {
  for (;;) {
    int pending = 0;
    MPI_Status status;
    if (MPI_Iprobe(MPI_ANY_SOURCE, kQueryTag, comm_, &pending, &status) != MPI_SUCCESS ||
        !pending) {
      return;
    }
    int ignored = 0;
    MPI_Recv(&ignored, 1, MPI_INT, status.MPI_SOURCE, kQueryTag, comm_, MPI_STATUS_IGNORE);
    std::vector<Entry> entries;
    {
      const std::lock_guard lock(mutex_);
      for (Watched& w : watched_) {
        const CollectiveProgress p = w.comm->progress();
        const double seconds = secondsInside(w, p, steadyNowNs());
        entries.push_back({static_cast<std::int64_t>(p.sequence), p.inside ? 1 : 0,
                           static_cast<std::int64_t>(seconds * 1e3)});
      }
    }
    // Blocking is fine: the asker posted its receive before asking.
    MPI_Send(entries.data(), static_cast<int>(entries.size() * 3), MPI_INT64_T, status.MPI_SOURCE,
             kReplyTag, comm_);
  }
}

void StallWatchdog::run() {
  while (!stop_.load()) {
    answerQueries();
    std::size_t index = 0;
    CollectiveProgress stalled;
    double waited = 0;
    bool warnNow = false;
    {
      const std::lock_guard lock(mutex_);
      for (std::size_t i = 0; i < watched_.size(); ++i) {
        const CollectiveProgress p = watched_[i].comm->progress();
        const double seconds = secondsInside(watched_[i], p, steadyNowNs());
        if (!p.inside || seconds <= timeoutSeconds_ / 2) continue;
        warnNow = seconds <= timeoutSeconds_;
        if (warnNow && watched_[i].warnedSequence == p.sequence) continue;
        if (warnNow) watched_[i].warnedSequence = p.sequence;
        index = i;
        stalled = p;
        waited = seconds;
        break;
      }
    }
    if (waited > 0 && warnNow) warn(index, stalled, waited);
    if (waited > 0 && !warnNow) reportAndAbort(index, stalled, waited);
    std::this_thread::sleep_for(kPollInterval);
  }
}

std::string StallWatchdog::whoIsBehind(std::size_t index, const CollectiveProgress& stuck) {
  std::size_t watchedCount = 0;
  {
    const std::lock_guard lock(mutex_);
    watchedCount = watched_.size();
  }
  // Ask everybody at once; answer their questions while waiting for the replies.
  std::vector<std::vector<Entry>> replies(static_cast<std::size_t>(size_));
  std::vector<MPI_Request> receives(static_cast<std::size_t>(size_), MPI_REQUEST_NULL);
  std::vector<bool> answered(static_cast<std::size_t>(size_), false);
  const int query = 0;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    replies[r].resize(watchedCount);
    MPI_Irecv(replies[r].data(), static_cast<int>(watchedCount * 3), MPI_INT64_T, r, kReplyTag,
              comm_, &receives[r]);
    MPI_Request send;
    if (MPI_Isend(&query, 1, MPI_INT, r, kQueryTag, comm_, &send) == MPI_SUCCESS) {
      MPI_Request_free(&send);
    }
  }
  const std::int64_t deadline = steadyNowNs() + static_cast<std::int64_t>(kReplySeconds * 1e9);
  while (steadyNowNs() < deadline) {
    answerQueries();
    bool all = true;
    for (int r = 0; r < size_; ++r) {
      if (r == rank_ || answered[r]) continue;
      int done = 0;
      if (MPI_Test(&receives[r], &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && done) {
        answered[r] = true;
      } else {
        all = false;
      }
    }
    if (all) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const auto k = static_cast<std::int64_t>(stuck.sequence);
  std::vector<std::string> behind, silent;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    if (!answered[r]) {
      // A reply that comes later must not land in a buffer that is gone.
      MPI_Cancel(&receives[r]);
      MPI_Wait(&receives[r], MPI_STATUS_IGNORE);
      silent.push_back("rank " + std::to_string(r));
      continue;
    }
    const Entry& e = replies[r][index];
    if (e.sequence < k) {
      behind.push_back("rank " + std::to_string(r) + " (last entered #" +
                       std::to_string(e.sequence) + (e.inside ? ", still in it" : "") + ")");
    }
  }
  std::string text;
  if (!behind.empty()) text += "not reached by " + listRanks(behind);
  if (!behind.empty() && !silent.empty()) text += "; ";
  if (!silent.empty()) text += "no answer from " + listRanks(silent);
  if (behind.empty() && silent.empty()) text += "every rank has reached it (a transport problem?)";
  return text;
}

std::string StallWatchdog::describeWait(std::size_t index, const CollectiveProgress& stuck,
                                        double waitedSeconds) const {
  std::string name;
  {
    const std::lock_guard lock(mutex_);
    name = watched_[index].name;
  }
  CallSignature what;
  what.sequence = static_cast<std::int64_t>(stuck.sequence);
  what.kind = static_cast<std::int64_t>(stuck.kind);
  what.count = static_cast<std::int64_t>(stuck.count);
  what.dataType = static_cast<std::int64_t>(stuck.type);
  return "waited " + std::to_string(static_cast<int>(waitedSeconds)) + " s (--stall-timeout " +
         std::to_string(static_cast<int>(timeoutSeconds_)) + ") in " + describe(what) + " on the " +
         name + " communicator; ";
}

void StallWatchdog::warn(std::size_t index, const CollectiveProgress& stuck, double waitedSeconds) {
  const std::string wait = describeWait(index, stuck, waitedSeconds);
  logLine(LogLevel::kWarn, "warning: slow: " + wait + whoIsBehind(index, stuck) +
                               "; the job is aborted if it still waits at the timeout");
}

void StallWatchdog::reportAndAbort(std::size_t index, const CollectiveProgress& stuck,
                                   double waitedSeconds) {
  const std::string wait = describeWait(index, stuck, waitedSeconds);
  abortJob("stall: " + wait + whoIsBehind(index, stuck) + "; aborting the job");
}

}  // namespace ringtrain::collectives
