// allreduce_perf's options: nccl-tests' all_reduce_perf options (its letters and meanings) and
// ringtrain's own, read into Options on every rank (a bad one ends the job on every rank).
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "collectives/communicator.h"
#include "collectives/data_type.h"
#include "collectives/environment.h"

namespace ringtrain::allreduce_perf {

using collectives::DataType;
using collectives::ReduceOp;

// The choices of -d and -o: the types and reductions ringtrain's collectives have, under the names
// nccl-tests prints, in nccl-tests' order (which "all" follows). -d also takes ringtrain's names
// (float32, ...); nccl-tests' int8, uint8, uint32, uint64, prod and mulsum have no counterpart.
inline constexpr std::pair<DataType, const char*> kTypeChoices[] = {
    {DataType::kInt32, "int32"},    {DataType::kInt64, "int64"},
    {DataType::kFloat16, "half"},   {DataType::kFloat32, "float"},
    {DataType::kFloat64, "double"}, {DataType::kBFloat16, "bfloat16"}};
inline constexpr std::pair<ReduceOp, const char*> kOpChoices[] = {{ReduceOp::kSum, "sum"},
                                                                  {ReduceOp::kMax, "max"},
                                                                  {ReduceOp::kMin, "min"},
                                                                  {ReduceOp::kAverage, "avg"}};

// `value`'s name in `table` (the type and redop columns).
template <typename T, std::size_t N>
const char* choiceName(const std::pair<T, const char*> (&table)[N], T value) {
  for (const auto& [v, name] : table)
    if (v == value) return name;
  return "?";
}

struct Options {
  std::size_t minBytes = 8;
  std::size_t maxBytes = std::size_t{256} << 20;
  std::size_t stepFactor = 2;  // each size is the last times this ...
  std::size_t stepBytes = 0;   // ... or, when not 0 (-i), the last plus this
  int warmupIters = 5;
  int iters = 20;
  int aggIters = 1;       // calls per timed iteration (-m)
  int checkIters = 1;     // checked calls per measurement, stopping at the first wrong one; 0: none
  bool blocking = false;  // -z 1: a barrier after every call
  // nccl-tests' -g, -t, -G: one buffer per rank and no CUDA graphs, so only 1, 1 and 0 are taken;
  // -N, -C, -T, -p, -R likewise only at the values that ask for what this program does anyway.
  int gpus = 1;
  int threads = 1;
  int cudaGraphLaunches = 0;
  int runCycles = 1;       // -N: one pass over the sizes
  int reportCpuTime = 0;   // -C: wall-clock time
  int timeoutSeconds = 0;  // -T: none
  int parallelInit = 0;    // -p: the communicators are set up one after another
  int localRegister = 0;   // -R: no buffer registration
  std::vector<DataType> types = {DataType::kFloat32};
  std::vector<ReduceOp> ops = {ReduceOp::kSum};
  int average = 1;  // 0: rank 0's time, 1: average over ranks, 2: minimum, 3: maximum
  // One table by default, for the backend `ringtrain train --backend auto` averages host
  // gradients with across nodes (on one node it takes shm, which has no stand-alone all-reduce
  // to time); --device cuda takes nccl (readBackends). Others only when --backends names them.
  std::vector<std::string> backends = {"tuned"};
  // Extra tables by label ("ring-net512K"): the ring backend with another ringNetworkChunkBytes.
  std::map<std::string, std::size_t> ringNetworkVariants;
  collectives::CommunicatorOptions communicator;
  std::string jsonPath;
  bool memoryBandwidth = false;
  // "cpu": host buffers and the host backends; "cuda": device buffers and the device backends.
  std::string device = "cpu";
  double progressSeconds = 10;  // rank 0's stderr says k of n at most this often; 0: every size
  int testWrongRank = -1;       // test hook: this rank spoils one element of every checked result
  // --autotune (not --tune, which Open MPI's mpirun takes for itself): measure the tuned
  // backend's algorithms and write its table instead of the tables.
  bool tune = false;
  std::string tuneOut = "allreduce_tuning.json";
  int tuneRounds = 3;
  double tuneMargin =
      0.05;  // a size keeps the last size's choice unless another is this much faster
};

// "a, b, c"
std::string joinNames(const std::vector<std::string>& names, const std::string& separator);

// The sweep's sizes in bytes, before rounding to whole elements: from --minbytes to --maxbytes,
// each the last times --stepfactor or plus --stepbytes (as nccl-tests steps).
std::vector<std::size_t> sweepSizes(const Options& o);

// Reads the command line on every rank; when any rank finds it wrong, every rank exits. Returns
// false for --help (printed by then).
bool readCommandLine(int argc, char** argv, const collectives::MpiEnvironment& env, Options& o);

}  // namespace ringtrain::allreduce_perf
