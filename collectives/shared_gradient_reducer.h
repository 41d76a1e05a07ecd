// SharedGradientReducer: the gradient average of ranks that share one node's memory, without
// messages and without a communication thread.
//
// Every rank's gradient buffer lives in a window of shared memory (the model writes its gradients
// there itself: gradientStorage()), and so does one averaged buffer for the node
// (averagedStorage()). Backward announces how far its gradients are final (segmentReady, and
// gradientsFinalFrom for parts of a layer) by raising this rank's watermark: one number per rank
// in shared memory that says, for this step, from which offset to the end of the buffer
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
// With shareParameters the node keeps one copy of the parameters and of the optimiser's state in
// the window (the ZeRO-1 split of the update, with the all-gather for free: every rank reads the
// same memory). A rank that takes a piece averages it and hands it to onAveraged at once, and its
// optimiser updates that piece of the shared copy; the piece's done flag then means "averaged and
// updated", and finishStep returns once every piece is done, so the next forward reads final
// parameters. No other rank writes a piece's parameters before every rank has announced its
// gradients in the next step, and a rank announces a layer only once its backward no longer reads
// that layer's parameters (Model::announceWhenParametersFree).
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

#include "collectives/gradient_reducer.h"
#include "collectives/reduce_kernels.h"
#include "collectives/shared_memory_window.h"
#include "collectives/trace_sink.h"

namespace ringtrain::collectives {

struct SharedReducerOptions {
  std::size_t fusionThresholdBytes = 4 << 20;  // buckets: what finishStep hands out, in order
  bool overlap = true;
  // Work unit: small enough that the last rank to finish backward shares the tail with the
  // others, large enough that taking a ticket (one atomic on a shared line) costs nothing.
  std::size_t pieceBytes = 64 << 10;
  // One copy of the parameters and of the optimiser's state (stateSize floats) for the node, in the
  // window (sharedParameters(), sharedState()), instead of one per rank: finishStep then hands each
  // piece to onAveraged on the rank that averaged it, right after averaging it, and that rank's
  // optimiser updates the shared copy. Every element is updated once per step by one rank instead
  // of once by every rank. The caller must not read a layer's parameters after announcing its
  // gradients until finishStep returns (another rank may be updating them), and must place its
  // parameters and state in the window.
  // The copy is kept in the window from the start; setParametersShared switches between it and
  // per-rank copies between steps.
  bool shareParameters = false;
  std::size_t stateSize = 0;         // floats of optimiser state, with shareParameters
  double stallTimeoutSeconds = 300;  // 0: wait for ever
  // Test-only fault injection, as CommunicatorOptions': rank testStallRank never announces
  // anything in step testStallStep (counted from 1) and waits for ever instead.
  int testStallRank = -1;
  std::uint64_t testStallStep = 0;
};

class SharedGradientReducer final : public GradientExchange {
 public:
  // Collective over `comm`. Throws std::invalid_argument on every rank, with the same text, when
  // the ranks do not all share one node.
  SharedGradientReducer(MPI_Comm comm, std::vector<GradientSegment> segments,
                        const SharedReducerOptions& options, TraceSink* trace = nullptr);
  ~SharedGradientReducer() override;

  // Where this rank's model must keep its gradients, and where the averages appear.
  std::span<float> gradientStorage() const { return {gradients(rank_), count_}; }
  std::span<float> averagedStorage() const { return {averaged_, count_}; }
  // With shareParameters: the node's one copy of the parameters and of the optimiser's state
  // (stateSize floats), whose contents rank 0 provides; empty without.
  std::span<float> sharedParameters() const;
  std::span<float> sharedState() const;
  // Whether finishStep updates the shared copy (each piece once, by the rank that averaged it)
  // or hands every piece to every rank's own copy. Collective: every rank calls it between the
  // same two steps, after moving its parameters and state (the caller's part). Throws
  // std::logic_error without options.shareParameters.
  void setParametersShared(bool shared);
  bool parametersShared() const { return parametersShared_; }
  // How long one cache line takes to go from rank 0's core to another rank's and back, in ns:
  // kProbeGroups groups of kProbeTripsPerGroup round trips with each other rank in turn, the
  // median group's mean, the largest over the ranks. Collective; every rank returns rank 0's
  // figure. It tells whether the cores share a cache (tens of ns) or not (hundreds: on a VM whose
  // host moves its vCPUs, from one second to the next).
  double measureRoundTripNs();
  static constexpr int kProbeGroups = 5;
  static constexpr int kProbeTripsPerGroup = 8;

  std::span<const GradientBucket> buckets() const override { return buckets_; }
  std::string describePlan() const override {
    return collectives::describePlan(buckets_, segments_);
  }
  // `gradients` and `averaged` must be gradientStorage() and averagedStorage(). finishStep may
  // hand a bucket over in several parts (see GradientExchange::finishStep).
  void beginStep(std::span<const float> gradients, std::span<float> averaged) override;
  void segmentReady(int segment) override;
  bool wantsProgress() const override { return true; }
  void gradientsFinalFrom(std::size_t offset) override;
  void finishStep(const std::function<void(const GradientBucket&)>& onAveraged) override;
  double lastWaitSeconds() const override { return lastWaitSeconds_; }
  double lastReduceSeconds() const override { return lastReduceSeconds_; }

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
  std::uint64_t* probeLine() const;  // the probe's counter, then rank 0's verdict
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
  // Writes the piece's average; markPieceDone then tells the other ranks it is done (averaged,
  // and with shared parameters also updated).
  void averagePiece(const Piece& piece, StoreMode store);
  void markPieceDone(const Piece& piece);
  // Calls onAveraged for [begin, end) cut at bucket boundaries, from the end of the buffer.
  void handOverRange(std::size_t begin, std::size_t end,
                     const std::function<void(const GradientBucket&)>& onAveraged) const;
  // finishStep with shareParameters: every rank averages and updates pieces until none is left.
  void finishSharedStep(const std::function<void(const GradientBucket&)>& onAveraged);
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
  SharedReducerOptions options_;
  TraceSink* trace_;
  std::unique_ptr<SharedMemoryWindow> window_;
  std::unique_ptr<Layout> layout_;
  float* averaged_ = nullptr;
  int spinLimit_ = 0;

  bool parametersShared_ = false;
  std::uint64_t probeSequence_ = 0;  // the probe line's last value, the same on every rank
  std::uint64_t step_ = 0;
  std::size_t published_ = 0;  // this step's lowest offset announced so far
  double reduceSeconds_ = 0;
  std::size_t averagedBytes_ = 0;  // this step, by this rank
  double lastWaitSeconds_ = 0;
  double lastReduceSeconds_ = 0;
};

}  // namespace ringtrain::collectives
