#include "collectives/shared_gradient_reducer.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <chrono>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "collectives/mpi_check.h"
#include "collectives/reduce_kernels.h"
#include "collectives/steady_clock.h"

namespace ringtrain::collectives {

namespace {

constexpr std::size_t kLine = 64;
// Pieces handed over at a time while others are still to be averaged: about 20 us of optimiser
// on one core, short enough that a rank soon reconsiders whether to average instead.
constexpr std::size_t kHandOverPieces = 4;

std::size_t roundUp(std::size_t bytes) {
  return (bytes + kLine - 1) / kLine * kLine;
}

std::atomic_ref<std::uint64_t> flag(std::uint64_t* address) {
  return std::atomic_ref<std::uint64_t>(*address);
}

// Writes the lines of [data, data + bytes) back to memory and drops them from every cache.
void evictLines(const void* data, std::size_t bytes) {
  const char* line = static_cast<const char*>(data);
  for (std::size_t at = 0; at < bytes; at += kLine) {
#ifdef __CLFLUSHOPT__
    _mm_clflushopt(const_cast<char*>(line + at));
#else
    _mm_clflush(line + at);
#endif
  }
}

}  // namespace

// Every rank's region: its watermark and its hand-over count (a line each), then its gradients.
// Rank 0's region also holds the ticket counter, the probe's line, one done flag per piece (a
// line each: different ranks set them at once), the averaged buffer and, with shared parameters,
// the parameters and the optimiser's state.
struct SharedGradientReducer::Layout {
  std::size_t gradients = 0;  // offset in every region
  std::size_t rankBytes = 0;  // region size of ranks other than 0
  std::size_t ticket = 0;     // offsets in rank 0's region
  std::size_t probe = 0;
  std::size_t done = 0;
  std::size_t averaged = 0;
  std::size_t parameters = 0;
  std::size_t state = 0;
  std::size_t rank0Bytes = 0;

  static constexpr std::size_t handedOver = kLine;  // offset in every region

  Layout(std::size_t pieces, std::size_t count, bool shared, std::size_t stateSize) {
    gradients = 2 * kLine;
    rankBytes = gradients + roundUp(count * sizeof(float));
    ticket = rankBytes;
    probe = ticket + kLine;
    done = probe + kLine;
    averaged = done + pieces * kLine;
    parameters = averaged + roundUp(count * sizeof(float));
    state = parameters + (shared ? roundUp(count * sizeof(float)) : 0);
    rank0Bytes = state + (shared ? roundUp(stateSize * sizeof(float)) : 0);
  }
};

SharedGradientReducer::SharedGradientReducer(MPI_Comm comm, std::vector<GradientSegment> segments,
                                             const SharedReducerOptions& options, TraceSink* trace)
    : segments_(std::move(segments)),
      buckets_(planBuckets(segments_, options.fusionThresholdBytes)),
      options_(options),
      trace_(trace) {
  requireOneNode(comm, "backend 'shm'");
  RINGTRAIN_MPI_CHECK(MPI_Comm_rank(comm, &rank_));
  RINGTRAIN_MPI_CHECK(MPI_Comm_size(comm, &size_));
  if (!segments_.empty()) count_ = segments_.back().offset + segments_.back().count;
  // Pieces start on cache-line boundaries, so no two ranks ever write the same line.
  pieceElements_ = std::max(kLine, options_.pieceBytes / kLine * kLine) / sizeof(float);
  for (std::size_t begin = 0; begin < count_; begin += pieceElements_)
    pieces_.push_back({begin, std::min(count_, begin + pieceElements_)});
  layout_ = std::make_unique<Layout>(pieces_.size(), count_, options_.shareParameters,
                                     options_.stateSize);
  window_ = std::make_unique<SharedMemoryWindow>(
      comm, rank_ == 0 ? layout_->rank0Bytes : layout_->rankBytes);
  averaged_ = reinterpret_cast<float*>(window_->region(0) + layout_->averaged);
  parametersShared_ = options_.shareParameters;
  spinLimit_ = window_->spinLimit(WaitMode::kSpin);
}

SharedGradientReducer::~SharedGradientReducer() = default;

std::span<float> SharedGradientReducer::sharedParameters() const {
  if (!options_.shareParameters) return {};
  return {reinterpret_cast<float*>(window_->region(0) + layout_->parameters), count_};
}

std::span<float> SharedGradientReducer::sharedState() const {
  if (!options_.shareParameters) return {};
  return {reinterpret_cast<float*>(window_->region(0) + layout_->state), options_.stateSize};
}

void SharedGradientReducer::setParametersShared(bool shared) {
  if (shared && !options_.shareParameters) {
    throw std::logic_error(
        "SharedGradientReducer: no shared copy of the parameters was made (shareParameters)");
  }
  parametersShared_ = shared;
}

std::uint64_t* SharedGradientReducer::probeLine() const {
  return reinterpret_cast<std::uint64_t*>(window_->region(0) + layout_->probe);
}

double SharedGradientReducer::measureRoundTripNs() {
  // The line counts up: rank 0 writes an odd step of the sequence (ping), its partner the next
  // (pong); every rank advances probeSequence_ by the same amount, so the sequence needs no reset.
  std::atomic_ref<std::uint64_t> line = flag(probeLine());
  auto waitForValue = [&](std::uint64_t value) {
    // A bare spin first: a pause between loads would be part of what is measured.
    for (int spin = 0; spin < 4096; ++spin) {
      if (line.load(std::memory_order_acquire) >= value) return;
    }
    waitFor([&] { return line.load(std::memory_order_acquire) >= value; },
            [] { return std::string("the cross-core probe"); });
  };
  auto roundTrip = [&] {
    line.store(++probeSequence_, std::memory_order_release);
    waitForValue(++probeSequence_);
  };
  auto answer = [&] {
    waitForValue(++probeSequence_);
    line.store(++probeSequence_, std::memory_order_release);
  };
  double slowest = 0;
  for (int peer = 1; peer < size_; ++peer) {
    if (rank_ == 0) {
      roundTrip();  // waits for the partner to arrive; not measured
      // Timed in groups, so that reading the clock is a small part; the median group, so that
      // a vCPU taken away for a moment does not count.
      std::array<double, kProbeGroups> groups{};
      for (double& group : groups) {
        const std::int64_t start = steadyNowNs();
        for (int i = 0; i < kProbeTripsPerGroup; ++i)
          roundTrip();
        group = static_cast<double>(steadyNowNs() - start) / kProbeTripsPerGroup;
      }
      std::nth_element(groups.begin(), groups.begin() + kProbeGroups / 2, groups.end());
      slowest = std::max(slowest, groups[kProbeGroups / 2]);
    } else if (rank_ == peer) {
      for (int i = 0; i < 1 + kProbeGroups * kProbeTripsPerGroup; ++i)
        answer();
    } else {
      probeSequence_ += 2 * (1 + kProbeGroups * kProbeTripsPerGroup);
    }
  }
  // Rank 0's verdict, in the line after the counter, released by the counter's last step.
  std::atomic_ref<std::uint64_t> verdict = flag(probeLine() + 1);
  if (rank_ == 0) {
    verdict.store(std::bit_cast<std::uint64_t>(slowest), std::memory_order_relaxed);
    line.store(++probeSequence_, std::memory_order_release);
  } else {
    waitForValue(++probeSequence_);
    slowest = std::bit_cast<double>(verdict.load(std::memory_order_relaxed));
  }
  return slowest;
}

std::string SharedGradientReducer::segmentAt(std::size_t offset) const {
  for (const GradientSegment& s : segments_) {
    if (offset < s.offset + s.count) return s.name;
  }
  return "the end of the buffer";
}

float* SharedGradientReducer::gradients(int rank) const {
  return reinterpret_cast<float*>(window_->region(rank) + layout_->gradients);
}

std::uint64_t* SharedGradientReducer::watermark(int rank) const {
  return reinterpret_cast<std::uint64_t*>(window_->region(rank));
}

std::uint64_t* SharedGradientReducer::handedOver(int rank) const {
  return reinterpret_cast<std::uint64_t*>(window_->region(rank) + Layout::handedOver);
}

std::uint64_t SharedGradientReducer::handedOverValue(std::size_t pieces) const {
  return step_ * (pieces_.size() + 1) + pieces;
}

std::size_t SharedGradientReducer::othersMostLeftToHandOver() const {
  const std::uint64_t stepBase = handedOverValue(0);
  std::size_t most = 0;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    const std::uint64_t v = flag(handedOver(r)).load(std::memory_order_relaxed);
    // Below this step's base: nothing handed over yet; past this step: done with it.
    const std::size_t handed =
        v < stepBase ? 0 : std::min<std::uint64_t>(v - stepBase, pieces_.size());
    most = std::max(most, pieces_.size() - handed);
  }
  return most;
}

bool SharedGradientReducer::preferHandOver(std::size_t leftToHandOver, bool lastToFinish) const {
  const std::size_t others = othersMostLeftToHandOver();
  return leftToHandOver > others || (leftToHandOver == others && lastToFinish);
}

std::uint64_t SharedGradientReducer::watermarkValue(std::size_t offset) const {
  return step_ * (count_ + 1) + (count_ - offset);
}

std::uint64_t* SharedGradientReducer::doneFlag(std::size_t piece) const {
  return reinterpret_cast<std::uint64_t*>(window_->region(0) + layout_->done + piece * kLine);
}

std::uint64_t* SharedGradientReducer::ticket() const {
  return reinterpret_cast<std::uint64_t*>(window_->region(0) + layout_->ticket);
}

void SharedGradientReducer::beginStep(std::span<const float> gradients, std::span<float> averaged) {
  if (gradients.data() != gradientStorage().data() || averaged.data() != averaged_ ||
      gradients.size() != count_ || averaged.size() != count_) {
    throw std::logic_error(
        "SharedGradientReducer: the gradients must be kept in gradientStorage() and averaged "
        "into averagedStorage()");
  }
  ++step_;
  if (rank_ == options_.testStallRank && step_ == options_.testStallStep) {
    printLine("test fault: not taking part in step " + std::to_string(step_) +
              " of the shared-memory gradient average; waiting for ever instead");
    for (;;)
      std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  published_ = count_ + 1;
  reduceSeconds_ = 0;
  averagedBytes_ = 0;
}

void SharedGradientReducer::publish(std::size_t finalFrom) {
  if (finalFrom >= published_) return;
  published_ = finalFrom;
  // Sequentially consistent: the gradients backward wrote are visible before the watermark is.
  flag(watermark(rank_)).store(watermarkValue(finalFrom), std::memory_order_seq_cst);
}

void SharedGradientReducer::segmentReady(int segment) {
  if (segment < 0 || static_cast<std::size_t>(segment) >= segments_.size()) {
    throw std::out_of_range("segmentReady: no segment " + std::to_string(segment));
  }
  if (options_.overlap) publish(segments_[static_cast<std::size_t>(segment)].offset);
}

void SharedGradientReducer::gradientsFinalFrom(std::size_t offset) {
  if (options_.overlap) publish(std::min(offset, count_));
}

bool SharedGradientReducer::pieceReadyToTake() const {
  const std::optional<std::size_t> next = nextTicket();
  return next && pieceReady(*next);
}

bool SharedGradientReducer::pieceReady(std::size_t piece) const {
  const std::uint64_t needed = watermarkValue(pieces_[piece].begin);
  for (int r = 0; r < size_; ++r) {
    if (flag(watermark(r)).load(std::memory_order_acquire) < needed) return false;
  }
  return true;
}

bool SharedGradientReducer::othersFinished() const {
  const std::uint64_t final = watermarkValue(0);
  for (int r = 0; r < size_; ++r) {
    if (r != rank_ && flag(watermark(r)).load(std::memory_order_acquire) < final) return false;
  }
  return true;
}

std::optional<std::size_t> SharedGradientReducer::nextTicket() const {
  const std::uint64_t first = (step_ - 1) * pieces_.size();
  const std::uint64_t t = flag(ticket()).load(std::memory_order_acquire);
  if (t >= step_ * pieces_.size()) return std::nullopt;
  return pieces_.size() - 1 - static_cast<std::size_t>(t - first);  // from the end
}

bool SharedGradientReducer::takeReadyTicket(std::size_t& piece) {
  const std::uint64_t first = (step_ - 1) * pieces_.size();
  const std::uint64_t end = step_ * pieces_.size();
  std::atomic_ref<std::uint64_t> counter = flag(ticket());
  std::uint64_t t = counter.load(std::memory_order_acquire);
  while (t < end) {
    const std::size_t candidate = pieces_.size() - 1 - static_cast<std::size_t>(t - first);
    if (!pieceReady(candidate)) return false;
    if (counter.compare_exchange_weak(t, t + 1, std::memory_order_acq_rel)) {
      piece = candidate;
      return true;
    }
  }
  return false;
}

template <class Ready, class Describe>
void SharedGradientReducer::waitFor(Ready ready, Describe waitingFor) {
  if (ready()) return;
  const std::int64_t started = steadyNowNs();
  int spins = 0;
  while (!ready()) {
    pauseOrYield(spins, spinLimit_);
    if (options_.stallTimeoutSeconds <= 0 || spins % 256 != 0) continue;
    const double waited = static_cast<double>(steadyNowNs() - started) * 1e-9;
    if (waited > options_.stallTimeoutSeconds) {
      std::ostringstream message;
      message << "stall: waited " << options_.stallTimeoutSeconds << " s (--stall-timeout "
              << options_.stallTimeoutSeconds << ") in step " << step_
              << " of the shared-memory gradient average for " << waitingFor()
              << "; aborting the job";
      abortJob(message.str());
    }
  }
}

void SharedGradientReducer::averagePiece(const Piece& piece, StoreMode store) {
  const std::int64_t start = steadyNowNs();
  const std::size_t count = piece.end - piece.begin;
  float* out = averaged_ + piece.begin;
  // (g_0 + g_1 + ... + g_{n-1}) / n, in rank order whoever computes it.
  for (int r = 1; r < size_; ++r) {
    const float* sum = r == 1 ? gradients(0) + piece.begin : out;
    reduceArrays(DataType::kFloat32, ReduceOp::kSum, sum, gradients(r) + piece.begin, out, count,
                 r == size_ - 1 ? size_ : 1, store);
  }
  if (size_ == 1) std::copy_n(gradients(0) + piece.begin, count, out);
  reduceSeconds_ += static_cast<double>(steadyNowNs() - start) * 1e-9;
  averagedBytes_ += count * sizeof(float);
}

void SharedGradientReducer::markPieceDone(const Piece& piece) {
  flag(doneFlag(static_cast<std::size_t>(&piece - pieces_.data())))
      .store(step_, std::memory_order_seq_cst);
}

void SharedGradientReducer::handOverRange(
    std::size_t begin, std::size_t end,
    const std::function<void(const GradientBucket&)>& onAveraged) const {
  for (const GradientBucket& b : buckets_) {
    const std::size_t from = std::max(b.offset, begin);
    const std::size_t to = std::min(b.offset + b.count, end);
    if (from >= to) continue;
    GradientBucket part = b;
    part.offset = from;
    part.count = to - from;
    onAveraged(part);
  }
}

std::size_t SharedGradientReducer::donePiecesFrom(std::size_t below) const {
  while (below > 0 && flag(doneFlag(below - 1)).load(std::memory_order_acquire) >= step_)
    --below;
  return below;
}

std::string SharedGradientReducer::describeWait(std::size_t notDone) const {
  if (const std::optional<std::size_t> next = nextTicket()) {
    std::string ranks;
    const std::uint64_t needed = watermarkValue(pieces_[*next].begin);
    for (int r = 0; r < size_; ++r) {
      if (flag(watermark(r)).load() < needed)
        ranks += (ranks.empty() ? "rank " : ", ") + std::to_string(r);
    }
    return "the gradients of " + segmentAt(pieces_[*next].begin) + " from " + ranks;
  }
  return "the average of " + segmentAt(pieces_[notDone - 1].begin) +
         " (another rank is averaging it)";
}

void SharedGradientReducer::finishSharedStep(
    const std::function<void(const GradientBucket&)>& onAveraged) {
  const std::int64_t start = steadyNowNs();
  double callbacks = 0;
  // Every ticket taken and every piece averaged and updated, by whichever rank.
  auto allDone = [&] { return !nextTicket() && donePiecesFrom(pieces_.size()) == 0; };
  for (;;) {
    std::size_t piece = 0;
    if (takeReadyTicket(piece)) {
      // The same core updates from it next: ordinary stores keep it in this core's cache.
      const std::int64_t t0 = steadyNowNs();
      averagePiece(pieces_[piece], StoreMode::kCached);
      const std::int64_t t1 = steadyNowNs();
      if (trace_) {
        trace_->span("averaging", "all-reduce", t0, t1, static_cast<std::int64_t>(averagedBytes_),
                     "shm");
      }
      handOverRange(pieces_[piece].begin, pieces_[piece].end, onAveraged);
      // Release: the updated parameters are visible before the flag is.
      markPieceDone(pieces_[piece]);
      callbacks += static_cast<double>(steadyNowNs() - t1) * 1e-9;
      continue;
    }
    if (allDone()) break;
    // Another rank is still in backward, or is updating the last pieces.
    const std::int64_t waitStart = steadyNowNs();
    waitFor([&] { return pieceReadyToTake() || allDone(); },
            [&] { return describeWait(donePiecesFrom(pieces_.size())); });
    const std::int64_t waitEnd = steadyNowNs();
    if (trace_ && waitEnd - waitStart > 1000) trace_->span("shm wait", "wait", waitStart, waitEnd);
  }
  const double total = static_cast<double>(steadyNowNs() - start) * 1e-9;
  lastWaitSeconds_ = total - callbacks;
  lastReduceSeconds_ = reduceSeconds_;
}

void SharedGradientReducer::finishStep(
    const std::function<void(const GradientBucket&)>& onAveraged) {
  if (!options_.overlap) publish(0);
  if (parametersShared_) {
    finishSharedStep(onAveraged);
    return;
  }
  const std::int64_t start = steadyNowNs();
  // The step ends when the last rank's optimiser does, and what is left after backward (the
  // averages still to compute, every rank's update of every piece) is shared so that the ranks
  // end together: a rank with more left to hand over to its optimiser than any other updates
  // (from what is averaged), the others average. Equal counts (nobody has updated yet): the rank
  // that finished backward last updates first, since the others averaged while it computed. A
  // rank averages anyway when nothing is averaged for it to update, and updates when no piece is
  // ready to average.
  const bool lastToFinish = othersFinished();
  std::size_t notDone = pieces_.size();  // pieces [notDone, end) are averaged and handed over
  double callbacks = 0;
  std::int64_t averagingSince = -1;
  auto closeAveraging = [&](std::int64_t now) {
    if (trace_ && averagingSince >= 0) {
      trace_->span("averaging", "all-reduce", averagingSince, now,
                   static_cast<std::int64_t>(averagedBytes_), "shm");
    }
    averagingSince = -1;
  };
  // Hands [pieces_[from].begin, pieces_[notDone].begin) to onAveraged, cut at bucket boundaries,
  // from the end of the buffer (buckets_ run from the end), and tells the other ranks how far it
  // got.
  auto handOver = [&](std::size_t from) {
    const std::int64_t t0 = steadyNowNs();
    closeAveraging(t0);
    handOverRange(pieces_[from].begin, notDone == pieces_.size() ? count_ : pieces_[notDone].begin,
                  onAveraged);
    notDone = from;
    flag(handedOver(rank_))
        .store(handedOverValue(pieces_.size() - notDone), std::memory_order_relaxed);
    callbacks += static_cast<double>(steadyNowNs() - t0) * 1e-9;
  };
  while (notDone > 0) {
    const std::size_t doneFrom = donePiecesFrom(notDone);
    const bool canHandOver = doneFrom < notDone;
    // While pieces are still to be averaged, in small parts, so that the choice is made again.
    const std::size_t handOverFrom =
        nextTicket() ? std::max(doneFrom, notDone - std::min(notDone, kHandOverPieces)) : doneFrom;
    if (canHandOver && (preferHandOver(notDone, lastToFinish) || !pieceReadyToTake())) {
      handOver(handOverFrom);
      continue;
    }
    std::size_t piece = 0;
    if (takeReadyTicket(piece)) {
      if (averagingSince < 0) averagingSince = steadyNowNs();
      // Streamed past this core's cache: every rank's optimiser reads it next, so no core should
      // have to own its lines first (measured with a temporary switch, 6 interleaved rounds of 1
      // and 2 ranks of the default MLP: median efficiency 0.85 against 0.81 with ordinary
      // stores).
      averagePiece(pieces_[piece], StoreMode::kStreaming);
      markPieceDone(pieces_[piece]);
      // The other ranks' gradients this rank just read, out of every cache: their owners
      // overwrite them in the next backward, and a line another core still holds must first be
      // taken from it, which costs several times more than a read from memory where the cores
      // share no cache (measured: docs/engine.md).
      const Piece& averaged = pieces_[piece];
      for (int r = 0; r < size_; ++r) {
        if (r != rank_) {
          evictLines(gradients(r) + averaged.begin,
                     (averaged.end - averaged.begin) * sizeof(float));
        }
      }
      continue;
    }
    if (canHandOver) {
      handOver(handOverFrom);
      continue;
    }
    // Nothing to average and nothing to hand over: another rank is still in backward, or is
    // averaging the next piece to hand over.
    const std::int64_t waitStart = steadyNowNs();
    closeAveraging(waitStart);
    waitFor([&] { return pieceReadyToTake() || donePiecesFrom(notDone) < notDone; },
            [&] { return describeWait(notDone); });
    const std::int64_t waitEnd = steadyNowNs();
    if (trace_ && waitEnd - waitStart > 1000) trace_->span("shm wait", "wait", waitStart, waitEnd);
  }
  closeAveraging(steadyNowNs());
  const double total = static_cast<double>(steadyNowNs() - start) * 1e-9;
  lastWaitSeconds_ = total - callbacks;
  lastReduceSeconds_ = reduceSeconds_;
}

}  // namespace ringtrain::collectives
