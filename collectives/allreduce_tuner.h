// AllreduceTuner: the search behind `allreduce_perf --autotune`, beside the table it makes
// (allreduce_tuning.h). Every algorithm of the tuned backend is timed alone at every size, in
// interleaved rounds, each size taking the median. In place decides (the trainer reduces its
// gradient buckets in place): the fastest wins a size unless the last size's choice is within the
// margin of it, so that boundaries move only for a real difference, not for noise. Adjacent sizes
// with one algorithm become one rule.
//
// The caller times the calls (allreduce_perf's harness also checks their results) and writes the
// table (writeTuningFile).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include <mpi.h>

#include "collectives/allreduce_tuning.h"
#include "collectives/communicator.h"

namespace ringtrain::collectives {

struct TunerOptions {
  int rounds = 3;        // interleaved rounds per size
  double margin = 0.05;  // the last size's choice stays unless another is this much faster
};

// One size: the median microseconds per call of every candidate (in algorithms()'s order), in
// place and out of place, infinity where a candidate does not take the size; and the choice.
struct TunedSize {
  std::size_t bytes = 0;
  std::vector<double> inPlaceUs, outOfPlaceUs;
  AllreduceAlgorithm chosen = AllreduceAlgorithm::kRing;
};

// Microseconds per call of `comm` on the size being tuned, in place or out of place. Called on
// every rank at once (it may communicate); the result must be the same on every rank.
using TimeCalls = std::function<double(Communicator& comm, bool inPlace)>;

class AllreduceTuner {
 public:
  // Collective over `comm`: one communicator per candidate, each sending every size to its
  // algorithm; the hierarchical one only across nodes (on one node it is the ring in two passes).
  AllreduceTuner(MPI_Comm comm, const CommunicatorOptions& options, const RankLayout& layout,
                 TunerOptions tuner);
  ~AllreduceTuner();

  std::vector<AllreduceAlgorithm> algorithms() const;
  // Collective: every candidate that takes `bytes`, timed with `time` in `rounds` interleaved
  // rounds (out of place, then in place), and the size's choice.
  TunedSize tuneSize(std::size_t bytes, const TimeCalls& time);
  // The table of the sizes tuned so far (at least one), for the layout, this CPU and this build.
  TuningTable table() const;

 private:
  struct Candidate;
  std::vector<Candidate> candidates_;
  RankLayout layout_;
  TunerOptions tuner_;
  std::vector<std::pair<std::size_t, AllreduceAlgorithm>> choices_;  // by size, ascending
  int previous_ = -1;  // the last size's choice, an index into candidates_ (-1: none yet)
};

}  // namespace ringtrain::collectives
