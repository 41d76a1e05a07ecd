#include "engine/shared_gradient_reducer.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "collectives/mpi_check.h"
#include "collectives/reduce_kernels.h"
#include "base/steady_clock.h"

namespace ringtrain::engine {

using collectives::DataType;
using collectives::ReduceOp;

namespace {

constexpr std::size_t kLine = 64;
// Pieces handed over at a time while others are still to be averaged: short enough that a rank
// soon reconsiders whether to average instead.
constexpr std::size_t kHandOverPieces = 4;

std::size_t roundUp(std::size_t bytes) {
  return (bytes + kLine - 1) / kLine * kLine;
}

std::atomic_ref<std::uint64_t> flag(std::uint64_t* address) {
  return std::atomic_ref<std::uint64_t>(*address);
}

}  // namespace

// Every rank's region: its watermark and its hand-over count (a line each), then its gradients.
// Rank 0's region also holds the ticket counter, one done flag per piece (a line each: different
// ranks set them at once) and the averaged buffer.
struct SharedGradientReducer::Layout {
  std::size_t gradients = 0;  // offset in every region
  std::size_t rankBytes = 0;  // region size of ranks other than 0
  std::size_t ticket = 0;     // offsets in rank 0's region
  std::size_t done = 0;
  std::size_t averaged = 0;
  std::size_t rank0Bytes = 0;

  static constexpr std::size_t handedOver = kLine;  // offset in every region

  Layout(std::size_t pieces, std::size_t count) {
    gradients = 2 * kLine;
    rankBytes = gradients + roundUp(count * sizeof(float));
    ticket = rankBytes;
    done = ticket + kLine;
    averaged = done + pieces * kLine;
    rank0Bytes = averaged + roundUp(count * sizeof(float));
  }
};

SharedGradientReducer::SharedGradientReducer(MPI_Comm comm, std::vector<GradientSegment> segments,
                                             const ExchangeOptions& options,
                                             TraceSink* trace)
    : segments_(std::move(segments)),
      buckets_(planBuckets(segments_, options.fusionThresholdBytes)),
      options_(options),
      trace_(trace) {
  collectives::requireOneNode(comm, "backend 'shm'");
  RINGTRAIN_MPI_CHECK(MPI_Comm_rank(comm, &rank_));
  RINGTRAIN_MPI_CHECK(MPI_Comm_size(comm, &size_));
  if (!segments_.empty()) count_ = segments_.back().offset + segments_.back().count;
  // Pieces start on cache-line boundaries, so no two ranks ever write the same line.
  pieceElements_ = std::max(kLine, options_.pieceBytes / kLine * kLine) / sizeof(float);
  for (std::size_t begin = 0; begin < count_; begin += pieceElements_)
    pieces_.push_back({begin, std::min(count_, begin + pieceElements_)});
  layout_ = std::make_unique<Layout>(pieces_.size(), count_);
  window_ = std::make_unique<collectives::SharedMemoryWindow>(
      comm, rank_ == 0 ? layout_->rank0Bytes : layout_->rankBytes);
  averaged_ = reinterpret_cast<float*>(window_->region(0) + layout_->averaged);
  spinLimit_ = window_->spinLimit(collectives::WaitMode::kSpin);
}

SharedGradientReducer::~SharedGradientReducer() = default;

StepBuffers SharedGradientReducer::hostBuffers(std::span<float> modelGradients) {
  if (modelGradients.size() != count_) {
    throw std::invalid_argument("SharedGradientReducer: the model has " +
                                std::to_string(modelGradients.size()) +
                                " gradients, the segments cover " + std::to_string(count_));
  }
  return {{gradients(rank_), count_}, {averaged_, count_}};
}

std::size_t SharedGradientReducer::bufferBytes() const {
  const std::size_t window =
      layout_->rank0Bytes + static_cast<std::size_t>(size_ - 1) * layout_->rankBytes;
  return window - 2 * count_ * sizeof(float);
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

void SharedGradientReducer::beginStep(const StepBuffers& buffers) {
  if (buffers.gradients.data() != gradients(rank_) || buffers.averaged.data() != averaged_ ||
      buffers.gradients.size() != count_ || buffers.averaged.size() != count_) {
    throw std::logic_error("SharedGradientReducer: a step must run on hostBuffers()");
  }
  ++step_;
  if (options_.test.stallsIn(rank_, step_)) {
    options_.test.stall("step " + std::to_string(step_) + " of the shared-memory gradient average");
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
  bool warned = false;  // at half the timeout, once: the slow rank is named before the abort
  while (!ready()) {
    collectives::pauseOrYield(spins, spinLimit_);
    // The clock every 256 spins, and after each yield: on a loaded machine 256 yields can take
    // a second, which would move the warning past half the timeout.
    if (options_.stallTimeoutSeconds <= 0 || (spins <= spinLimit_ && spins % 256 != 0)) continue;
    const double waited = static_cast<double>(steadyNowNs() - started) * 1e-9;
    if (waited <= options_.stallTimeoutSeconds / 2 ||
        (warned && waited <= options_.stallTimeoutSeconds)) {
      continue;
    }
    const bool abort = waited > options_.stallTimeoutSeconds;
    std::ostringstream message;
    message << (abort ? "stall" : "warning: slow") << ": waited " << static_cast<int>(waited)
            << " s (--stall-timeout " << options_.stallTimeoutSeconds << ") in step " << step_
            << " of the shared-memory gradient average for " << waitingFor()
            << (abort ? "; aborting the job"
                      : "; the job is aborted if it still waits at the timeout");
    if (abort) collectives::abortJob(message.str());
    logLine(LogLevel::kWarn, message.str());
    warned = true;
  }
}

void SharedGradientReducer::averagePiece(const Piece& piece) {
  const std::int64_t start = steadyNowNs();
  const std::size_t count = piece.end - piece.begin;
  float* out = averaged_ + piece.begin;
  // (g_0 + g_1 + ... + g_{n-1}) / n, in rank order whoever computes it (without "/ n": the sum).
  const int divisor = options_.reduction == Reduction::kSum ? 1 : size_;
  for (int r = 1; r < size_; ++r) {
    const float* sum = r == 1 ? gradients(0) + piece.begin : out;
    // Streamed past this core's cache: every rank's optimiser reads the average next, so no
    // core should have to take its lines from this one first.
    collectives::reduceArrays(DataType::kFloat32, ReduceOp::kSum, sum, gradients(r) + piece.begin,
                              out, count, r == size_ - 1 ? divisor : 1,
                              collectives::StoreMode::kStreaming);
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

void SharedGradientReducer::closeAveraging(StepProgress& step, std::int64_t now) const {
  if (trace_ && step.averagingSince >= 0) {
    trace_->span("averaging", "all-reduce", step.averagingSince, now,
                 static_cast<std::int64_t>(averagedBytes_), "shm");
  }
  step.averagingSince = -1;
}

void SharedGradientReducer::handOver(StepProgress& step, std::size_t from,
                                     const std::function<void(const GradientBucket&)>& onAveraged) {
  const std::int64_t t0 = steadyNowNs();
  closeAveraging(step, t0);
  const std::size_t end = step.notDone == pieces_.size() ? count_ : pieces_[step.notDone].begin;
  handOverRange(pieces_[from].begin, end, onAveraged);
  step.notDone = from;
  flag(handedOver(rank_))
      .store(handedOverValue(pieces_.size() - step.notDone), std::memory_order_relaxed);
  step.callbackSeconds += static_cast<double>(steadyNowNs() - t0) * 1e-9;
}

bool SharedGradientReducer::averageReadyPiece(StepProgress& step) {
  std::size_t piece = 0;
  if (!takeReadyTicket(piece)) return false;
  if (step.averagingSince < 0) step.averagingSince = steadyNowNs();
  averagePiece(pieces_[piece]);
  markPieceDone(pieces_[piece]);
  return true;
}

void SharedGradientReducer::waitForWork(StepProgress& step) {
  const std::int64_t waitStart = steadyNowNs();
  closeAveraging(step, waitStart);
  const std::size_t notDone = step.notDone;
  waitFor([&] { return pieceReadyToTake() || donePiecesFrom(notDone) < notDone; },
          [&] { return describeWait(notDone); });
  const std::int64_t waitEnd = steadyNowNs();
  if (trace_ && waitEnd - waitStart > 1000) trace_->span("shm wait", "wait", waitStart, waitEnd);
}

void SharedGradientReducer::finishStep(
    const std::function<void(const GradientBucket&)>& onAveraged) {
  if (!options_.overlap) publish(0);
  const std::int64_t start = steadyNowNs();
  // The step ends when the last rank's optimiser does, and what is left after backward (the
  // averages still to compute, every rank's update of every piece) is shared so that the ranks
  // end together: a rank with more left to hand over to its optimiser than any other updates
  // (from what is averaged), the others average. Equal counts (nobody has updated yet): the rank
  // that finished backward last updates first, since the others averaged while it computed. A
  // rank averages anyway when nothing is averaged for it to update, and updates when no piece is
  // ready to average.
  const bool lastToFinish = othersFinished();
  StepProgress step;
  step.notDone = pieces_.size();
  while (step.notDone > 0) {
    const std::size_t doneFrom = donePiecesFrom(step.notDone);
    const bool canHandOver = doneFrom < step.notDone;
    // While pieces are still to be averaged, in small parts, so that the choice is made again.
    const std::size_t handOverFrom =
        nextTicket() ? std::max(doneFrom, step.notDone - std::min(step.notDone, kHandOverPieces))
                     : doneFrom;
    if (canHandOver && (preferHandOver(step.notDone, lastToFinish) || !pieceReadyToTake())) {
      handOver(step, handOverFrom, onAveraged);
    } else if (!averageReadyPiece(step)) {
      // Nothing to average: hand over what is done, or wait for another rank (still in
      // backward, or averaging the next piece to hand over).
      if (canHandOver) {
        handOver(step, handOverFrom, onAveraged);
      } else {
        waitForWork(step);
      }
    }
  }
  closeAveraging(step, steadyNowNs());
  const double total = static_cast<double>(steadyNowNs() - start) * 1e-9;
  lastWaitSeconds_ = total - step.callbackSeconds;
  lastReduceSeconds_ = reduceSeconds_;
}

}  // namespace ringtrain::engine
