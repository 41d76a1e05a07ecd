// SharedGradientReducer: the gradient average of ranks that share one node's memory, without
// messages and without a communication thread.
//
// Every rank's gradient buffer lives in a window of shared memory (the model writes its gradients
// there itself: hostBuffers()), and so does one averaged buffer for the node. Backward announces
// how far its gradients are final (segmentReady) by raising this rank's watermark: one number per
// rank in shared memory that says, for this step, from which offset to the end of the buffer
// everything is final (backward finishes the buffer from its end). The buffer is cut into pieces of
// about pieceBytes, handed out from the end of the buffer to its start (the order in which backward
// finishes them) by a shared ticket counter. In finishStep every rank takes a ticket once every
// rank has announced the layers its piece covers, writes the piece's average into the averaged
// buffer, and hands what is averaged to onAveraged (the optimiser) from the end of the buffer, in
// parts of buckets as they complete. The formula does not depend on who computes it, (g_0 + g_1 +
// ... + g_{n-1}) / n summed in rank order, so the result is the same bits on every rank and in
// every run.
//
// Why: with one core per rank a communication thread can only run beside backward by taking time
// from it, and the ranks seldom finish backward together. The rank that finishes first spends its
// wait averaging the pieces whose layers every rank has finished, and updating its parameters
// from what is averaged while nothing is ready. After backward, what is left (averages and every
// rank's updates) is balanced so that the ranks end together: each rank publishes how many pieces
// it has handed to its optimiser, and the one with the most left updates while the others
// average.
//
// Reuse of the shared buffers from one step to the next needs no extra synchronisation:
// - a rank overwrites its gradients in step s + 1 only after its finishStep of step s returned,
//   which waits for every piece of step s, i.e. until every read of its step-s gradients is over;
// - a piece's average of step s + 1 is written only once every rank has announced that piece's
//   layers in step s + 1, i.e. after every rank is done with the step-s averages (the optimiser
//   runs inside or right after finishStep, before the next backward).
// Ticket ranges are per step ([(s-1)P, sP) for P pieces), so a rank still looking for work of
// step s can never take one of step s + 1.
//
// Without overlap no rank starts averaging before every rank has finished backward: the
// announcements are held back until finishStep. The results are the same bits either way.
//
// A rank that waits longer than stallTimeoutSeconds for another rank's gradients aborts the job,
// naming the ranks it waited for (a hang is a bug). Every rank must announce every segment once
// per step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <mpi.h>

#include "collectives/communicator.h"
#include "collectives/reduce_kernels.h"
#include "collectives/shared_memory_window.h"
#include "base/trace_sink.h"
#include "engine/bucket_plan.h"
#include "engine/exchange_options.h"
#include "engine/gradient_exchange.h"

namespace ringtrain::engine {

class SharedGradientReducer final : public GradientExchange {
 public:
  // Collective over `comm`. Throws std::invalid_argument on every rank, with the same text, when
  // the ranks do not all share one node.
  SharedGradientReducer(MPI_Comm comm, std::vector<GradientSegment> segments,
                        const ExchangeOptions& options,
                        TraceSink* trace = nullptr);
  ~SharedGradientReducer() override;

  std::span<const GradientBucket> buckets() const override { return buckets_; }
  std::string describePlan() const override { return engine::describePlan(buckets_, segments_); }
  // This rank's gradients and the node's averages, both in the window: the model must keep its
  // gradients there (modelGradients only gives their size).
  StepBuffers hostBuffers(std::span<float> modelGradients) override;
  // The window less this rank's gradients and the averages: the other ranks' gradients, mapped.
  std::size_t bufferBytes() const override;
  // `buffers` must be hostBuffers()'. finishStep may hand a bucket over in several parts (see
  // GradientExchange::finishStep).
  void beginStep(const StepBuffers& buffers) override;
  void segmentReady(int segment) override;
  void finishStep(const std::function<void(const GradientBucket&)>& onAveraged) override;
  double lastWaitSeconds() const override { return lastWaitSeconds_; }
  double lastReduceSeconds() const override { return lastReduceSeconds_; }
  collectives::Communicator* communicator() const override { return nullptr; }

 private:
  struct Piece {
    std::size_t begin = 0;
    std::size_t end = 0;
  };
  struct Layout;  // where everything lies in the window (shared_gradient_reducer.cc)

  float* gradients(int rank) const;
  std::string segmentAt(std::size_t offset) const;  // the name of the segment holding it
  std::uint64_t* watermark(int rank) const;
  // The watermark that says "final from `offset`" in the current step: larger in later steps,
  // and within a step the smaller the offset.
  std::uint64_t watermarkValue(std::size_t offset) const;
  std::uint64_t* doneFlag(std::size_t piece) const;
  std::uint64_t* ticket() const;
  // How many pieces `rank` has handed over to its optimiser in this step (step-tagged, as the
  // watermark), and the most pieces any other rank still has to hand over.
  std::uint64_t* handedOver(int rank) const;
  // The hand-over count that says "`pieces` handed over" in the current step.
  std::uint64_t handedOverValue(std::size_t pieces) const;
  std::size_t othersMostLeftToHandOver() const;
  // Whether a rank with `leftToHandOver` pieces still to hand over should update rather than
  // average (see finishStep).
  bool preferHandOver(std::size_t leftToHandOver, bool lastToFinish) const;

  void publish(std::size_t finalFrom);
  // Whether every rank has announced the layers `piece` covers; whether every other rank has
  // finished its backward.
  bool pieceReady(std::size_t piece) const;
  bool othersFinished() const;
  // The piece the next ticket stands for (none once all are taken), and whether it is ready.
  std::optional<std::size_t> nextTicket() const;
  bool pieceReadyToTake() const;
  // Takes the next ticket only if its piece is ready, so that averaging never waits.
  bool takeReadyTicket(std::size_t& piece);
  // Writes the piece's average; markPieceDone then tells the other ranks it is done.
  void averagePiece(const Piece& piece);
  void markPieceDone(const Piece& piece);
  // Calls onAveraged for [begin, end) cut at bucket boundaries, from the end of the buffer.
  void handOverRange(std::size_t begin, std::size_t end,
                     const std::function<void(const GradientBucket&)>& onAveraged) const;
  // finishStep's steps. StepProgress: pieces [notDone, end) are averaged and handed over; the
  // seconds spent in onAveraged; when this rank's current run of averaging began (-1: none).
  struct StepProgress {
    std::size_t notDone = 0;
    double callbackSeconds = 0;
    std::int64_t averagingSince = -1;
  };
  // Ends the current run of averaging (its timeline span).
  void closeAveraging(StepProgress& step, std::int64_t now) const;
  // Hands [pieces_[from].begin, pieces_[notDone].begin) to onAveraged, cut at bucket boundaries,
  // from the end of the buffer (buckets_ run from the end), and tells the other ranks how far
  // this rank got.
  void handOver(StepProgress& step, std::size_t from,
                const std::function<void(const GradientBucket&)>& onAveraged);
  // Averages the next piece if it is ready; false when there was none.
  bool averageReadyPiece(StepProgress& step);
  // Waits until a piece is ready to average or another is averaged.
  void waitForWork(StepProgress& step);
  // The lowest p such that pieces [p, below) are all averaged in this step.
  std::size_t donePiecesFrom(std::size_t below) const;
  std::string describeWait(std::size_t notDone) const;
  // Waits until `ready()` holds; past the stall timeout aborts the job with `waitingFor()`.
  template <class Ready, class Describe>
  void waitFor(Ready ready, Describe waitingFor);

  int rank_ = 0;
  int size_ = 1;
  std::size_t count_ = 0;
  std::vector<GradientSegment> segments_;
  std::vector<GradientBucket> buckets_;
  std::vector<Piece> pieces_;
  std::size_t pieceElements_ = 0;
  ExchangeOptions options_;
  TraceSink* trace_;
  std::unique_ptr<collectives::SharedMemoryWindow> window_;
  std::unique_ptr<Layout> layout_;
  float* averaged_ = nullptr;
  int spinLimit_ = 0;

  std::uint64_t step_ = 0;
  std::size_t published_ = 0;  // this step's lowest offset announced so far
  double reduceSeconds_ = 0;
  std::size_t averagedBytes_ = 0;  // this step, by this rank
  double lastWaitSeconds_ = 0;
  double lastReduceSeconds_ = 0;
};

}  // namespace ringtrain::engine
