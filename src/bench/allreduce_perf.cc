// allreduce_perf: all-reduce bus bandwidth of every backend, in the manner of nccl-tests'
// all_reduce_perf (its options, its table, its formulas):
//   algbw = bytes / time,   busbw = algbw * 2(n-1)/n
// busbw is what each rank's link must carry, so it can be compared with the hardware's bandwidth
// whatever the number of ranks. For every size each backend runs out of place and in place; the
// result of separate, checked runs (-c) is compared with the exact expected values on every rank
// (#wrong, summed over ranks, which also counts ranks whose bytes differ from rank 0's).
// stdout is nccl-tests' output, one table per backend (each with its own "# Out of bounds values"
// and "# Avg bus bandwidth" lines), so that scripts written for nccl-tests read it unchanged. By
// default there is one table, of the backend a training run's all-reduce uses (tuned on host
// buffers, nccl on device buffers); --backends names others, in the order given;
// everything else is on lines starting with '#'. Progress (k of n) goes to rank 0's stderr.
// As in nccl-tests, one harness times, checks and prints whatever collective a small struct
// describes (Collective; all-reduce is kAllReduce).
//
//   mpirun -np 2 build/bin/allreduce_perf -b 8 -e 256M -f 2 --json out.json
//   mpirun -np 2 build/bin/allreduce_perf -b 8 -e 128M -f 2 -i 0 -g 1 -c 1 -n 20 -w 5 -N 1 -C 0 -T
//   0 mpirun -np 2 build/bin/allreduce_perf -b 1M -e 4M -i 1M -d all -o sum --backends ring mpirun
//   -np 4 build/bin/allreduce_perf --backends mpi,ring,hierarchical --ranks-per-node 2
// (--ranks-per-node lets one machine stand in for several nodes: 4 ranks as 2 nodes x 2.)
//   mpirun -np 2 build/bin/allreduce_perf --also-ring-network-chunk-bytes 512K
// (a table "ring-net512K": the ring with 512 KiB messages to neighbours on other nodes, after
// the ring with its default network chunks, to compare chunkings in one run.)
//   mpirun -np 2 build/bin/allreduce_perf --device cuda --backends nccl,hierarchical-nccl
//   mpirun -np 2 build/bin/allreduce_perf --autotune --tune-out tuning.json
//   mpirun -np 2 build/bin/allreduce_perf --backends tuned,mpi --tuning-file tuning.json
// (--autotune: every algorithm of the tuned backend at every size, in interleaved rounds, and the
// fastest per size written as its tuning table; see docs/collectives.md.)
// (--device cuda: buffers from cudaMalloc on GPU local_rank % devices, for the device backends;
// the GPU's device-to-device copy bandwidth at each size, the figure to hold the bus bandwidth
// against, is printed before the tables. The results are copied back to the host to be checked.)
//
// This file runs the steps; allreduce_perf_options.h reads the command line,
// allreduce_perf_harness.h times and checks the calls, allreduce_perf_report.h prints the tables
// and builds the JSON, allreduce_perf_tune.h drives collectives' AllreduceTuner for --autotune.

#include <algorithm>
#include <exception>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include <mpi.h>

#include "collectives/communicator.h"
#include "collectives/environment.h"
#include "collectives/mpi_check.h"
#include "options/startup_errors.h"
#include "src/bench/allreduce_perf_harness.h"
#include "src/bench/allreduce_perf_options.h"
#include "src/bench/allreduce_perf_report.h"
#include "src/bench/allreduce_perf_tune.h"
#include "src/bench/bench_device.h"

namespace ringtrain::allreduce_perf {
namespace {

// The GPU the device backends take: the local rank, simulated under --ranks-per-node as
// hierarchical-nccl simulates it (the nccl backend always takes the real one; on one GPU both
// are GPU 0).
Gpu chooseGpu(const collectives::MpiEnvironment& env, const Options& o) {
  const int perNode = o.communicator.test.ranksPerNode;
  const int localRank = perNode > 0 ? env.worldRank() % perNode : env.localRank();
  Gpu gpu;
  std::optional<std::string> error;
  try {
    gpu.index = bench::selectDevice(localRank, &gpu.name);
  } catch (const std::exception& problem) {
    error = problem.what();
  }
  options::exitEverywhereOnError(error);
  return gpu;
}

// One communicator per table; a ring-net<size> table is the ring with those network chunks. A
// tuning file the tuned backend refuses (the same on every rank) ends the job on every rank.
std::vector<std::unique_ptr<Communicator>> makeCommunicators(const Options& o) {
  std::vector<std::unique_ptr<Communicator>> comms;
  std::optional<std::string> error;
  try {
    for (const auto& label : o.backends) {
      collectives::CommunicatorOptions options = o.communicator;
      const auto variant = o.ringNetworkVariants.find(label);
      if (variant != o.ringNetworkVariants.end()) options.ringNetworkChunkBytes = variant->second;
      const std::string backend = variant != o.ringNetworkVariants.end() ? "ring" : label;
      comms.push_back(collectives::makeCommunicator(backend, MPI_COMM_WORLD, options));
    }
  } catch (const std::invalid_argument& e) {
    error = e.what();
  }
  options::exitEverywhereOnError(error);
  return comms;
}

// Every backend's table, one after another; rank 0 prints them. Returns the wrong values found.
std::uint64_t runTables(const Bench& bench, const std::vector<Case>& cases,
                        const std::vector<std::unique_ptr<Communicator>>& comms,
                        const std::map<std::size_t, double>& copyGbps, nlohmann::json& json) {
  const Options& o = bench.options;
  const bool root = bench.rank == 0;
  Progress progress(comms.size() * cases.size() * sweepSizes(o).size(), o.progressSeconds, root);
  json["results"] = nlohmann::json::array();
  const SweepContext sweep{bench, cases, copyGbps, progress, json["results"]};
  std::uint64_t wrongValues = 0;
  for (std::size_t b = 0; b < comms.size(); ++b) {
    if (root) printTableHeader(o.backends[b]);
    const Table table = runTable(sweep, *comms[b], o.backends[b], root);
    if (root) printTableSummary(table, comms[b]->size());
    json["avg_busbw_gbps"][o.backends[b]] = table.busbwSum / std::max(1, table.measurements);
    wrongValues += table.wrongValues;
  }
  return wrongValues;
}

int run(int argc, char** argv) {
  collectives::MpiEnvironment env(&argc, &argv);
  Options o;
  if (!readCommandLine(argc, argv, env, o)) return 0;
  const Collective& collective = kAllReduce;
  const bool root = env.worldRank() == 0;
  const bool onDevice = o.device == "cuda";
  const Gpu gpu = onDevice ? chooseGpu(env, o) : Gpu{};
  const auto comms = o.tune ? std::vector<std::unique_ptr<Communicator>>{} : makeCommunicators(o);

  nlohmann::json json = describeRun(env, o, collective, gpu);
  printNcclTestsHeader(env, o, gpu);
  if (root) printRunHeader(o, json);
  describeHierarchical(comms, o, json, root);
  describeTuned(comms, json, root);
  const double memoryBytesPerSecond = o.memoryBandwidth ? reportMemoryBandwidth(json, root) : 0;

  // One allocation of the largest size, for every size, case and backend.
  std::optional<Buffers> buffers = allocateBuffers(std::max<std::size_t>(o.maxBytes, 64), onDevice);
  const Bench bench{collective, o, *buffers, env.worldRank()};
  const std::vector<Case> cases = makeCases(o, collective, env.worldRank(), env.worldSize());
  const auto copyGbps =
      onDevice ? measureDeviceCopies(*buffers, o, root) : std::map<std::size_t, double>{};
  if (o.tune) {
    const std::uint64_t wrong = tune(bench, cases.front(), json, root);
    if (root && !o.jsonPath.empty() && !writeJson(o.jsonPath, json)) return 1;
    return wrong == 0 ? 0 : 1;
  }
  const std::uint64_t wrongValues = runTables(bench, cases, comms, copyGbps, json);
  if (root) {
    if (comms.size() > 1 && env.worldSize() > 1 && cases.size() == 1)
      printRelativeBusbw(json["results"], o);
    if (o.memoryBandwidth && env.worldSize() > 1)
      printRingFloorShares(json["results"], memoryBytesPerSecond);
    json["wrong"] = wrongValues;
    if (!o.jsonPath.empty() && !writeJson(o.jsonPath, json)) return 1;
  }
  return wrongValues == 0 ? 0 : 1;
}

}  // namespace
}  // namespace ringtrain::allreduce_perf

int main(int argc, char** argv) {
  try {
    return ringtrain::allreduce_perf::run(argc, argv);
  } catch (const std::exception& e) {
    ringtrain::collectives::abortJob(std::string("allreduce_perf: ") + e.what());
  }
}
