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
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <mpi.h>

#include "collectives/aligned_buffer.h"
#include "collectives/communicator.h"
#include "collectives/environment.h"
#include "base/fingerprint.h"
#include "collectives/float16.h"
#include "collectives/hierarchical_communicator.h"
#include "collectives/mpi_check.h"
#include "collectives/tuned_communicator.h"
#include "src/bench/bench_device.h"
#include "base/byte_size.h"
#include "src/common/physical_memory.h"
#include "src/common/startup_errors.h"

namespace ringtrain {
namespace {

namespace po = boost::program_options;
using collectives::AlignedBuffer;
using collectives::Communicator;
using collectives::DataType;
using collectives::ReduceOp;

// The choices of -d and -o: the types and reductions ringtrain's collectives have, under the names
// nccl-tests prints, in nccl-tests' order (which "all" follows). -d also takes ringtrain's names
// (float32, ...); nccl-tests' int8, uint8, uint32, uint64, prod and mulsum have no counterpart.
constexpr std::pair<DataType, const char*> kTypeChoices[] = {
    {DataType::kInt32, "int32"},    {DataType::kInt64, "int64"},
    {DataType::kFloat16, "half"},   {DataType::kFloat32, "float"},
    {DataType::kFloat64, "double"}, {DataType::kBFloat16, "bfloat16"}};
constexpr std::pair<ReduceOp, const char*> kOpChoices[] = {{ReduceOp::kSum, "sum"},
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

// More sizes than this in one sweep are refused: an -i far below -e would run for days.
constexpr std::size_t kMaxSizes = 10000;

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

// "8", "64K", "1.5M", "1G", "256MB": nccl-tests' sizes (K, M, G are binary multiples, either
// case; a fraction is rounded down to whole bytes).
std::vector<std::string> splitList(const std::string& text) {
  std::vector<std::string> items;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    if (comma > start) items.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return items;
}

// The command line as typed, before it is checked and converted into Options.
struct OptionText {
  std::string minBytes = "8", maxBytes = "256M", stepBytes, type = "float", op = "sum", backends;
  std::string smallBytes, chunkBytes, networkChunkBytes, networkVariants;
  bool backendsGiven = false;
  bool stepFactorGiven = false;
};

std::string joinNames(const std::vector<std::string>& names, const std::string& separator) {
  std::string joined;
  for (const auto& name : names)
    joined += (joined.empty() ? "" : separator) + name;
  return joined;
}

// The names of `table` and "all", for --help and messages.
template <typename T, std::size_t N>
std::string choiceList(const std::pair<T, const char*> (&table)[N]) {
  std::vector<std::string> names;
  for (const auto& [value, name] : table)
    names.emplace_back(name);
  names.emplace_back("all");
  return joinNames(names, ", ");
}

// nccl-tests' options, with its letters and meanings (its README's "Arguments").
po::options_description ncclTestsOptions(Options& o, OptionText& text) {
  po::options_description description("nccl-tests options (as all_reduce_perf's)");
  auto add = description.add_options();
  add("help,h", "print this help");
  add("nthreads,t", po::value(&o.threads)->default_value(o.threads),
      "threads per process: 1 only (one rank per process; more ranks: mpirun -np)");
  add("ngpus,g", po::value(&o.gpus)->default_value(o.gpus),
      "GPUs per thread: 1 only (one buffer per rank; more ranks: mpirun -np)");
  add("minbytes,b", po::value(&text.minBytes)->default_value(text.minBytes),
      "smallest size (8, 64K, 1.5M, 1G); sizes are whole elements of --datatype: at least one, "
      "others rounded down");
  add("maxbytes,e", po::value(&text.maxBytes)->default_value(text.maxBytes), "largest size");
  add("stepbytes,i", po::value(&text.stepBytes),
      "fixed increment between sizes (instead of --stepfactor)");
  add("stepfactor,f", po::value(&o.stepFactor)->default_value(o.stepFactor),
      "multiplication factor between sizes, at least 2");
  add("iters,n", po::value(&o.iters)->default_value(o.iters), "timed iterations per size");
  add("agg_iters,m", po::value(&o.aggIters)->default_value(o.aggIters),
      "calls per timed iteration (nccl-tests groups them; here they run one after another)");
  add("warmup_iters,w", po::value(&o.warmupIters)->default_value(o.warmupIters),
      "untimed calls per size, backend and placement");
  add("check,c", po::value(&o.checkIters)->default_value(o.checkIters),
      "checked calls per measurement (0: no check, #wrong -1)");
  const std::string types = "type: " + choiceList(kTypeChoices) + " (or float32, float16, ...)";
  add("datatype,d", po::value(&text.type)->default_value(text.type), types.c_str());
  const std::string ops = "reduction: " + choiceList(kOpChoices);
  add("op,o", po::value(&text.op)->default_value(text.op), ops.c_str());
  add("average,a", po::value(&o.average)->default_value(o.average),
      "time reported: 0 rank 0, 1 average, 2 min, 3 max over ranks");
  add("blocking,z", po::value(&o.blocking)->default_value(o.blocking),
      "1: a barrier after every call (the calls themselves always complete before returning)");
  add("cudagraph,G", po::value(&o.cudaGraphLaunches)->default_value(o.cudaGraphLaunches),
      "CUDA graph launches: 0 only (refused otherwise: no backend here captures graphs)");
  add("run_cycles,N", po::value(&o.runCycles)->default_value(o.runCycles),
      "passes over the sizes: 1 only (run the program again for more)");
  add("report_cputime,C", po::value(&o.reportCpuTime)->default_value(o.reportCpuTime),
      "0 only: times are wall-clock (the calls block until complete, so CPU time adds nothing)");
  add("timeout,T", po::value(&o.timeoutSeconds)->default_value(o.timeoutSeconds),
      "0 only (no timeout; mpirun --timeout or timeout(1) bound a run)");
  add("parallel_init,p", po::value(&o.parallelInit)->default_value(o.parallelInit),
      "0 only: one rank per process sets up its communicators itself");
  add("local_register,R", po::value(&o.localRegister)->default_value(o.localRegister),
      "0 only: no backend here registers buffers");
  return description;
}

// ringtrain's own options: which backends, their tuning, and what else to report.
po::options_description ringtrainOptions(Options& o, OptionText& text) {
  po::options_description description("ringtrain options");
  auto add = description.add_options();
  add("backends", po::value(&text.backends)->default_value(text.backends),
      "comma-separated backends, one table each, in this order (default: the backend training "
      "uses, tuned; with --device cuda nccl)");
  add("ring-small-bytes", po::value(&text.smallBytes),
      "ring: largest all-reduce done by recursive doubling (bytes)");
  add("ring-chunk-bytes", po::value(&text.chunkBytes), "ring: bytes per pipelined message");
  add("ring-network-chunk-bytes", po::value(&text.networkChunkBytes),
      "ring: bytes per message to a neighbour on another node (0: as --ring-chunk-bytes)");
  add("also-ring-network-chunk-bytes", po::value(&text.networkVariants),
      "comma-separated sizes: one more ring table per size (ring-net<size>), the ring with "
      "that --ring-network-chunk-bytes");
  add("ring-depth",
      po::value(&o.communicator.ringPipelineDepth)->default_value(o.communicator.ringPipelineDepth),
      "ring: chunk receives in flight");
  add("ranks-per-node",
      po::value(&o.communicator.test.ranksPerNode)->default_value(o.communicator.test.ranksPerNode),
      "hierarchical, benchmarks only: every N consecutive ranks form a node (0: the real nodes)");
  add("json", po::value(&o.jsonPath), "also write the results to this JSON file");
  add("membw", po::bool_switch(&o.memoryBandwidth),
      "measure memory bandwidth first and report the ring's memory-traffic floor");
  add("progress-seconds", po::value(&o.progressSeconds)->default_value(o.progressSeconds),
      "rank 0 says on stderr how many measurements are done, at most this often (0: after each)");
  const std::string device =
      "cpu: host buffers (backends " + collectives::joinNames(collectives::hostBackends()) +
      "); cuda: cudaMalloc'd buffers on GPU local_rank % devices (backends " +
      collectives::joinNames(collectives::deviceBackends()) + "; default nccl)";
  add("device", po::value(&o.device)->default_value(o.device), device.c_str());
  add("tuning-file", po::value(&o.communicator.tuningFile),
      "tuned: the tuning table to use (default: the built-in one)");
  add("autotune", po::bool_switch(&o.tune),
      "instead of the tables: time every algorithm of the tuned backend at every size (the first "
      "-d and -o) and write the fastest per size to --tune-out");
  add("tune-out", po::value(&o.tuneOut)->default_value(o.tuneOut), "--autotune: the table's file");
  add("tune-rounds", po::value(&o.tuneRounds)->default_value(o.tuneRounds),
      "--autotune: interleaved rounds per size (the median counts)");
  add("tune-margin", po::value(&o.tuneMargin)->default_value(o.tuneMargin),
      "--autotune: a size keeps the previous size's algorithm unless another is this share faster");
  return description;
}

// Parsed, never shown in --help: the test hook.
po::options_description hiddenOptions(Options& o) {
  po::options_description hidden;
  hidden.add_options()("test-wrong-rank", po::value(&o.testWrongRank));
  return hidden;
}

// Reads size option `name` into `out`; an error message when `value` is no size.
std::optional<std::string> readSize(const std::string& value, const char* name, std::size_t& out) {
  const auto parsed = parseByteSize(value);
  if (!parsed)
    return std::string("--") + name + ": '" + value + "' is not a size (e.g. 8, 64K, 256M, 1G)";
  out = *parsed;
  return std::nullopt;
}

// As readSize; an option not given (empty) leaves `out` at its default.
std::optional<std::string> readSizeIfGiven(const std::string& value, const char* name,
                                           std::size_t& out) {
  if (value.empty()) return std::nullopt;
  return readSize(value, name, out);
}

// The sizes: the sweep's range and step, the ring's messages and the extra ring tables.
std::optional<std::string> readSizes(const OptionText& text, Options& o) {
  collectives::CommunicatorOptions& ring = o.communicator;
  if (auto e = readSize(text.minBytes, "minbytes", o.minBytes)) return e;
  if (auto e = readSize(text.maxBytes, "maxbytes", o.maxBytes)) return e;
  if (auto e = readSizeIfGiven(text.stepBytes, "stepbytes", o.stepBytes)) return e;
  // Both given: as nccl-tests, a factor above 1 wins and the increment is not used.
  const bool factorWins = text.stepFactorGiven && o.stepFactor > 1;
  if (text.stepBytes.empty() || factorWins) {
    o.stepBytes = 0;
  } else if (o.stepBytes == 0) {
    return "--stepbytes 0: must be at least 1";
  }
  if (auto e = readSizeIfGiven(text.smallBytes, "ring-small-bytes", ring.ringSmallMessageBytes))
    return e;
  if (auto e = readSizeIfGiven(text.chunkBytes, "ring-chunk-bytes", ring.ringChunkBytes)) return e;
  if (auto e = readSizeIfGiven(text.networkChunkBytes, "ring-network-chunk-bytes",
                               ring.ringNetworkChunkBytes))
    return e;
  for (const auto& size : splitList(text.networkVariants)) {
    if (auto e = readSize(size, "also-ring-network-chunk-bytes",
                          o.ringNetworkVariants["ring-net" + size]))
      return e;
  }
  return std::nullopt;
}

// nccl-tests' run options at values other than the ones that change nothing here, with why.
std::optional<std::string> unsupportedRunRequest(const Options& o) {
  struct Only {
    int value, only;
    const char* option;
    const char* why;
  };
  const Only runOptions[] = {
      {o.runCycles, 1, "run_cycles",
       "every size is measured once per run (run the program again, or raise --iters, for more)"},
      {o.reportCpuTime, 0, "report_cputime",
       "the times are wall-clock, and the calls complete before they return, so CPU time would "
       "tell the same"},
      {o.timeoutSeconds, 0, "timeout", "bound the run with mpirun --timeout or timeout(1) instead"},
      {o.parallelInit, 0, "parallel_init", "one rank per process, nothing to set up in parallel"},
      {o.localRegister, 0, "local_register", "no backend here registers buffers"}};
  for (const Only& r : runOptions) {
    if (r.value != r.only)
      return fmt::format("--{} {}: only {}; {}", r.option, r.value, r.only, r.why);
  }
  return std::nullopt;
}

// nccl-tests' options that ask for what a rank here does not have: several GPUs or threads per
// process, CUDA graphs; then the run options above.
std::optional<std::string> unsupportedRequest(const Options& o) {
  if (o.threads != 1) {
    return fmt::format(
        "--nthreads {}: only 1; ringtrain runs one rank per process (start {} times the ranks "
        "with mpirun -np instead)",
        o.threads, o.threads);
  }
  if (o.gpus != 1) {
    return fmt::format(
        "--ngpus {}: only 1; every rank drives one buffer ({}; start more ranks with mpirun -np "
        "instead)",
        o.gpus, o.device == "cuda" ? "one GPU per rank" : "--device cpu has no GPUs");
  }
  if (o.cudaGraphLaunches != 0) {
    return fmt::format("--cudagraph {}: refused; no backend here captures CUDA graphs{}",
                       o.cudaGraphLaunches,
                       o.device == "cuda" ? "" : " (and --device cpu runs no GPU work)");
  }
  return unsupportedRunRequest(o);
}

std::optional<std::string> checkRanges(const Options& o) {
  if (o.minBytes > o.maxBytes)
    return fmt::format("--minbytes {} is larger than --maxbytes {}", o.minBytes, o.maxBytes);
  if (o.stepBytes == 0 && o.stepFactor < 2)
    return fmt::format("--stepfactor {}: must be at least 2 (--stepbytes gives fixed steps)",
                       o.stepFactor);
  if (o.iters < 1 || o.warmupIters < 0 || o.aggIters < 1)
    return "--iters and --agg_iters must be at least 1 and --warmup_iters at least 0";
  if (o.checkIters < 0) return "--check must be 0 (no check) or a number of checked calls";
  if (o.average < 0 || o.average > 3) return "--average must be 0, 1, 2 or 3";
  if (o.progressSeconds < 0) return "--progress-seconds must be 0 or more";
  if (o.communicator.ringPipelineDepth < 1) return "--ring-depth must be at least 1";
  if (o.communicator.test.ranksPerNode < 0) return "--ranks-per-node must be 0 or more";
  if (o.tuneRounds < 1 || o.tuneMargin < 0)
    return "--tune-rounds must be at least 1 and --tune-margin at least 0";
  if (o.tune && o.device != "cpu") return "--autotune: host buffers only (--device cpu)";
  return unsupportedRequest(o);
}

// -d and -o: one of `table`'s names, "all" (every entry) or what `parse` reads (ringtrain's
// names), into `out`.
template <typename T, std::size_t N>
std::optional<std::string> readChoice(const char* option, const std::string& text,
                                      const std::pair<T, const char*> (&table)[N],
                                      std::optional<T> (*parse)(std::string_view),
                                      std::vector<T>& out) {
  out.clear();
  if (text == "all") {
    for (const auto& [value, name] : table)
      out.push_back(value);
    return std::nullopt;
  }
  const std::optional<T> parsed = parse(text);
  if (!parsed) return fmt::format("--{}: '{}' is not one of {}", option, text, choiceList(table));
  out.push_back(*parsed);
  return std::nullopt;
}

std::optional<std::string> readTypeAndOp(const OptionText& text, Options& o) {
  if (auto e = readChoice("datatype", text.type, kTypeChoices, collectives::parseDataType, o.types))
    return e;
  return readChoice("op", text.op, kOpChoices, collectives::parseReduceOp, o.ops);
}

// --device and --backends: the backends that the device's buffers take (collectives'
// hostBackends or deviceBackends), then the extra ring tables right after the ring they vary.
std::optional<std::string> readBackends(const OptionText& text, Options& o) {
  if (o.device != "cpu" && o.device != "cuda") return "--device: '" + o.device + "' (cpu, cuda)";
  const bool onDevice = o.device == "cuda";
  o.backends = splitList(onDevice && !text.backendsGiven ? std::string("nccl") : text.backends);
  if (o.backends.empty()) return "--backends: no backend given";
  const auto known = onDevice ? collectives::deviceBackends() : collectives::hostBackends();
  for (const auto& b : o.backends) {
    const std::optional<collectives::Backend> backend = collectives::backendFromName(b);
    if (b == "shm") {
      return "--backends: the stand-alone shm all-reduce was removed; `ringtrain train --backend "
             "shm` is the shared-memory gradient exchange (known here: " +
             collectives::joinNames(known) + ")";
    }
    if (!backend) {
      return "--backends: unknown backend '" + b + "' (known: " + collectives::joinNames(known) +
             ")";
    }
    if (collectives::isDeviceBackend(*backend) != onDevice) {
      return "--backends: '" + b + "' takes " + (onDevice ? "host" : "device") +
             " buffers: use --device " + (onDevice ? "cpu" : "cuda");
    }
  }
  const auto ring = std::find(o.backends.begin(), o.backends.end(), "ring");
  std::vector<std::string> variants;
  for (const auto& [label, bytes] : o.ringNetworkVariants)
    variants.push_back(label);
  o.backends.insert(ring == o.backends.end() ? ring : ring + 1, variants.begin(), variants.end());
  return std::nullopt;
}

// The sweep's sizes in bytes, before rounding to whole elements: from --minbytes to --maxbytes,
// each the last times --stepfactor or plus --stepbytes (as nccl-tests steps).
std::vector<std::size_t> sweepSizes(const Options& o) {
  std::vector<std::size_t> sizes;
  for (std::size_t bytes = o.minBytes; bytes <= o.maxBytes && sizes.size() <= kMaxSizes;) {
    sizes.push_back(bytes);
    const std::size_t room = o.maxBytes - bytes;
    if (o.stepBytes > 0 ? o.stepBytes > room : bytes > o.maxBytes / o.stepFactor) break;
    bytes = o.stepBytes > 0 ? bytes + o.stepBytes : bytes * o.stepFactor;
  }
  return sizes;
}

// The sweep's sizes against the data types and the machine. Sizes are whole elements of
// --datatype: a size below one element is refused, any other is rounded down to whole elements
// (as nccl-tests does). Every rank holds a send and a receive buffer of --maxbytes in host memory.
std::optional<std::string> sizeProblem(const Options& o, int ranksOnNode) {
  for (const DataType type : o.types) {
    const std::size_t e = sizeOf(type);
    if (o.minBytes >= e) continue;
    return fmt::format(
        "--minbytes {}: smaller than one {} element ({} bytes); sizes are whole "
        "elements of --datatype",
        o.minBytes, choiceName(kTypeChoices, type), e);
  }
  if (sweepSizes(o).size() > kMaxSizes) {
    return fmt::format("--stepbytes {}: more than {} sizes from --minbytes {} to --maxbytes {}",
                       o.stepBytes, kMaxSizes, o.minBytes, o.maxBytes);
  }
  const double needed = 2.0 * static_cast<double>(o.maxBytes) * ranksOnNode;
  const std::uint64_t memory = physicalMemoryBytes();
  if (memory == 0 || needed <= static_cast<double>(memory)) return std::nullopt;
  return fmt::format(
      "--maxbytes {}: the send and receive buffers need {:.1f} GiB on each of the {} rank(s) on "
      "this node, but the machine has {:.1f} GiB of memory",
      o.maxBytes, gibibytes(2.0 * static_cast<double>(o.maxBytes)), ranksOnNode,
      gibibytes(static_cast<double>(memory)));
}

// Returns an error message for the first bad option, or nullopt; sets `help` for --help.
std::optional<std::string> parseOptions(int argc, char** argv, int ranksOnNode, Options& o,
                                        bool& help) {
  OptionText text;
  text.backends = joinNames(o.backends, ",");
  po::options_description shown;
  shown.add(ncclTestsOptions(o, text)).add(ringtrainOptions(o, text));
  po::options_description all;
  all.add(shown).add(hiddenOptions(o));
  try {
    po::variables_map vm;
    po::store(po::command_line_parser(argc, argv).options(all).run(), vm);
    po::notify(vm);
    text.backendsGiven = !vm["backends"].defaulted();
    text.stepFactorGiven = !vm["stepfactor"].defaulted();
    if (vm.count("help")) {
      help = true;
      std::cout << "allreduce_perf: all-reduce bus bandwidth, nccl-tests' all_reduce_perf table "
                   "per backend\n(defaults -b 8 -e 256M -f 2; nccl-tests' are -b 32M -e 32M -i 1M; "
                   "one table, of tuned, unless --backends)\n"
                << shown << "\n";
      return std::nullopt;
    }
  } catch (const po::error& e) {
    return std::string(e.what());
  }
  if (auto e = readSizes(text, o)) return e;
  if (auto e = readBackends(text, o)) return e;
  if (auto e = checkRanges(o)) return e;
  if (auto e = readTypeAndOp(text, o)) return e;
  return sizeProblem(o, ranksOnNode);
}

// ---- Inputs and their exact results ----------------------------------------------------------
// Rank r's element i is a small integer that depends on (7i + 13r) mod 1021 only, so every sum,
// min and max is exact in every type and the expected result has period 1021: one table of 1021
// values checks a buffer of any size, quickly.
constexpr std::size_t kPeriod = 1021;

int inputInteger(int rank, std::size_t i, int range) {
  const std::size_t phase = (i * 7 + static_cast<std::size_t>(rank) * 13) % kPeriod;
  return static_cast<int>(phase % static_cast<std::size_t>(2 * range + 1)) - range;
}

void store(DataType type, double value, std::byte* out) {
  switch (type) {
    case DataType::kFloat32: {
      const float v = static_cast<float>(value);
      std::memcpy(out, &v, 4);
      break;
    }
    case DataType::kFloat64:
      std::memcpy(out, &value, 8);
      break;
    case DataType::kFloat16: {
      const auto v = collectives::toFloat16(static_cast<float>(value));
      std::memcpy(out, &v, 2);
      break;
    }
    case DataType::kBFloat16: {
      const auto v = collectives::toBFloat16(static_cast<float>(value));
      std::memcpy(out, &v, 2);
      break;
    }
    case DataType::kInt32: {
      const auto v = static_cast<std::int32_t>(value);
      std::memcpy(out, &v, 4);
      break;
    }
    case DataType::kInt64: {
      const auto v = static_cast<std::int64_t>(value);
      std::memcpy(out, &v, 8);
      break;
    }
  }
}

// The average as the backends compute it: the exact sum divided once in the type's working
// precision (float for the 16-bit types), truncating for integers.
double averageAsComputed(DataType type, std::int64_t sum, int ranks) {
  switch (type) {
    case DataType::kFloat64:
      return static_cast<double>(sum) / ranks;
    case DataType::kInt32:
    case DataType::kInt64:
      return static_cast<double>(sum / ranks);
    default:
      return static_cast<float>(sum) / static_cast<float>(ranks);
  }
}

struct Patterns {
  std::vector<std::byte> input;     // this rank's input, one period
  std::vector<std::byte> expected;  // the reduction's result, one period
};

Patterns allReducePatterns(DataType type, ReduceOp op, int rank, int ranks) {
  // Keep |sum| <= 256 so that sums are exact even in bfloat16.
  const int range = std::max(1, std::min(8, 256 / ranks));
  const std::size_t e = sizeOf(type);
  Patterns p{std::vector<std::byte>(kPeriod * e), std::vector<std::byte>(kPeriod * e)};
  for (std::size_t i = 0; i < kPeriod; ++i) {
    store(type, inputInteger(rank, i, range), p.input.data() + i * e);
    std::int64_t sum = 0;
    int lo = range, hi = -range;
    for (int r = 0; r < ranks; ++r) {
      const int v = inputInteger(r, i, range);
      sum += v;
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    const double expected = op == ReduceOp::kSum       ? static_cast<double>(sum)
                            : op == ReduceOp::kAverage ? averageAsComputed(type, sum, ranks)
                            : op == ReduceOp::kMin     ? lo
                                                       : hi;
    store(type, expected, p.expected.data() + i * e);
  }
  return p;
}

void fillPeriodic(std::byte* out, std::size_t count, const std::vector<std::byte>& pattern,
                  std::size_t elementSize) {
  const std::size_t bytes = count * elementSize;
  for (std::size_t offset = 0; offset < bytes; offset += pattern.size()) {
    std::memcpy(out + offset, pattern.data(), std::min(pattern.size(), bytes - offset));
  }
}

std::uint64_t countWrongElements(const std::byte* result, std::size_t count,
                                 const std::vector<std::byte>& expected, std::size_t elementSize) {
  std::uint64_t wrong = 0;
  for (std::size_t begin = 0; begin < count; begin += kPeriod) {
    const std::size_t n = std::min(kPeriod, count - begin);
    if (std::memcmp(result + begin * elementSize, expected.data(), n * elementSize) == 0) continue;
    for (std::size_t i = 0; i < n; ++i) {
      wrong += std::memcmp(result + (begin + i) * elementSize, expected.data() + i * elementSize,
                           elementSize) != 0;
    }
  }
  return wrong;
}

// ---- The collective under test ---------------------------------------------------------------
// What the harness below needs to know of a collective, as nccl-tests' struct testColl: its
// name, its data, its bus bandwidth, how to call it and how to check what a call left.
struct Collective {
  const char* name;
  // This rank's input and the exact result it must get back, one period of each.
  Patterns (*patterns)(DataType type, ReduceOp op, int rank, int ranks);
  // busbw from algbw on `ranks` ranks: the bandwidth each rank's link must carry.
  double (*busBandwidth)(double algbw, int ranks);
  // One call; send == recv is in place.
  void (*run)(Communicator& comm, const std::byte* send, std::byte* recv, std::size_t count,
              DataType type, ReduceOp op);
  // This rank's wrong values in `result` (`count` elements of `elementSize` bytes). Every rank
  // calls it at once: it may communicate.
  std::uint64_t (*check)(const std::byte* result, std::size_t count, const Patterns& patterns,
                         std::size_t elementSize);
};

// Every rank must end with the expected values, and all with the same bytes: a rank whose bytes
// differ from rank 0's counts as one more wrong value.
std::uint64_t checkAllReduce(const std::byte* result, std::size_t count, const Patterns& patterns,
                             std::size_t elementSize) {
  const std::uint64_t wrong = countWrongElements(result, count, patterns.expected, elementSize);
  const std::uint64_t hash = fingerprint(result, count * elementSize);
  std::uint64_t rootHash = hash;
  RINGTRAIN_MPI_CHECK(MPI_Bcast(&rootHash, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD));
  return wrong + (hash != rootHash);
}

// busbw = algbw * 2(n-1)/n: each rank sends and receives 2(n-1)/n of the buffer.
constexpr Collective kAllReduce{
    "allreduce", allReducePatterns,
    [](double algbw, int ranks) { return algbw * 2.0 * (ranks - 1) / ranks; },
    [](Communicator& comm, const std::byte* send, std::byte* recv, std::size_t count, DataType type,
       ReduceOp op) { comm.allreduce(send, recv, count, type, op); },
    checkAllReduce};

// ---- The harness: timing and checking, for any collective ------------------------------------
struct Measurement {
  double timeUs = 0;
  double algbw = 0;         // GB/s
  double busbw = 0;         // GB/s
  std::int64_t wrong = -1;  // summed over the ranks; -1: not checked (-c 0), as nccl-tests prints
};

double combineTime(double seconds, int mode) {
  double result = seconds;
  if (mode == 0) {
    RINGTRAIN_MPI_CHECK(MPI_Bcast(&result, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD));
    return result;
  }
  const MPI_Op op = mode == 1 ? MPI_SUM : mode == 2 ? MPI_MIN : MPI_MAX;
  RINGTRAIN_MPI_CHECK(MPI_Allreduce(&seconds, &result, 1, MPI_DOUBLE, op, MPI_COMM_WORLD));
  if (mode == 1) {
    int size = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    result /= size;
  }
  return result;
}

// The benchmark's two buffers: host memory, or device memory with host copies where the inputs
// are written and the results checked.
class Buffers {
 public:
  Buffers(std::size_t bytes, bool onDevice) {
    host_[0].resize(bytes);
    host_[1].resize(bytes);
    if (onDevice) {
      device_[0] = std::make_unique<bench::DeviceBytes>(bytes);
      device_[1] = std::make_unique<bench::DeviceBytes>(bytes);
    }
  }
  // What the communicator gets: 0 send, 1 recv.
  std::byte* data(int which) {
    return device_[which] ? device_[which]->data() : host_[which].data();
  }
  // Writes the input pattern into the send buffer.
  void fillSend(std::size_t count, const std::vector<std::byte>& pattern, std::size_t e) {
    fillPeriodic(host_[0].data(), count, pattern, e);
    if (device_[0]) bench::copyToDevice(device_[0]->data(), host_[0].data(), count * e);
  }
  // Buffer `which`'s first `bytes` bytes in host memory (the buffer itself on the host).
  std::byte* onHost(int which, std::size_t bytes) {
    if (device_[which]) bench::copyToHost(host_[which].data(), device_[which]->data(), bytes);
    return host_[which].data();
  }

 private:
  AlignedBuffer host_[2];
  std::unique_ptr<bench::DeviceBytes> device_[2];
};

// The two buffers of `bytes` each. A rank that cannot allocate them (a memory limit, ulimit -v)
// ends the job on every rank with one line naming the size, not a bare std::bad_alloc.
std::optional<Buffers> allocateBuffers(std::size_t bytes, bool onDevice) {
  std::optional<Buffers> buffers;
  std::optional<std::string> error;
  try {
    buffers.emplace(bytes, onDevice);
  } catch (const std::bad_alloc&) {
    error = fmt::format(
        "allocating the two {} buffers of --maxbytes {} bytes ({:.2f} GiB) each failed "
        "(std::bad_alloc): lower --maxbytes or raise the memory limit",
        onDevice ? "host copies of the" : "host", bytes, static_cast<double>(bytes) / (1 << 30));
  }
  exitEverywhereOnError(error);
  return buffers;
}

// What every measurement of a run shares.
struct Bench {
  const Collective& collective;
  const Options& options;
  Buffers& buffers;
  int rank;
};

// One data type and reduction of the sweep (several with -d all or -o all), with its data.
struct Case {
  DataType type;
  ReduceOp op;
  Patterns patterns;
};

// One call into buffer `result`; under --blocking every rank then waits for all others.
void call(const Bench& bench, Communicator& comm, const Case& c, int result, std::size_t count) {
  bench.collective.run(comm, bench.buffers.data(0), bench.buffers.data(result), count, c.type,
                       c.op);
  if (bench.options.blocking) comm.barrier();
}

// Seconds per call on `count` elements into buffer `result`, after the untimed warm-up calls:
// --iters iterations of --agg_iters calls, combined over the ranks as --average says.
double timeCalls(const Bench& bench, Communicator& comm, const Case& c, int result,
                 std::size_t count) {
  const Options& o = bench.options;
  for (int i = 0; i < o.warmupIters; ++i)
    call(bench, comm, c, result, count);
  comm.barrier();
  const double start = MPI_Wtime();
  const long calls = static_cast<long>(o.iters) * o.aggIters;
  for (long i = 0; i < calls; ++i)
    call(bench, comm, c, result, count);
  return combineTime((MPI_Wtime() - start) / static_cast<double>(calls), o.average);
}

// Up to --check calls on fresh inputs, each checked, stopping at the first with wrong values:
// those wrong values, summed over the ranks (0 when every call was right).
std::int64_t checkCalls(const Bench& bench, Communicator& comm, const Case& c, int result,
                        std::size_t count) {
  const std::size_t e = sizeOf(c.type);
  std::uint64_t total = 0;
  for (int i = 0; i < bench.options.checkIters && total == 0; ++i) {
    bench.buffers.fillSend(count, c.patterns.input, e);
    call(bench, comm, c, result, count);
    std::byte* values = bench.buffers.onHost(result, count * e);
    if (bench.rank == bench.options.testWrongRank) values[0] ^= std::byte{0xff};
    std::uint64_t wrong = bench.collective.check(values, count, c.patterns, e);
    RINGTRAIN_MPI_CHECK(MPI_Allreduce(&wrong, &total, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD));
  }
  return static_cast<std::int64_t>(total);
}

Measurement measure(const Bench& bench, Communicator& comm, const Case& c, std::size_t count,
                    bool inPlace) {
  const std::size_t e = sizeOf(c.type);
  const int result = inPlace ? 0 : 1;
  bench.buffers.fillSend(count, c.patterns.input, e);
  const double perCall = timeCalls(bench, comm, c, result, count);
  Measurement m;
  m.timeUs = perCall * 1e6;
  m.algbw = static_cast<double>(count * e) / perCall / 1e9;
  m.busbw = bench.collective.busBandwidth(m.algbw, comm.size());
  if (bench.options.checkIters > 0) m.wrong = checkCalls(bench, comm, c, result, count);
  return m;
}

double measureMemoryBandwidth() {
  constexpr std::size_t kCount = std::size_t{16} << 20;  // 64 MiB per array
  AlignedBuffer a(kCount * 4), b(kCount * 4), c(kCount * 4);
  auto* x = reinterpret_cast<float*>(a.data());
  auto* y = reinterpret_cast<float*>(b.data());
  auto* z = reinterpret_cast<float*>(c.data());
  for (std::size_t i = 0; i < kCount; ++i) {
    x[i] = 1.0f;
    y[i] = 2.0f;
  }
  double best = 0;
  for (int repeat = 0; repeat < 5; ++repeat) {
    RINGTRAIN_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    const double start = MPI_Wtime();
#pragma omp simd
    for (std::size_t i = 0; i < kCount; ++i)
      z[i] = x[i] + y[i];
    const double seconds = MPI_Wtime() - start;
    best = std::max(best, 3.0 * kCount * 4 / seconds);
  }
  if (z[kCount / 2] != 3.0f) collectives::abortJob("memory bandwidth probe computed garbage");
  return best;
}

std::string mpiLibrary() {
  char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  MPI_Get_library_version(version, &length);
  std::string text(version, static_cast<std::size_t>(length));
  return text.substr(0, text.find_first_of(",\n"));
}

// ---- The run, step by step -------------------------------------------------------------------
// Reads the command line on every rank; when any rank finds it wrong, every rank exits. Returns
// false for --help (printed by then).
bool readCommandLine(int argc, char** argv, const collectives::MpiEnvironment& env, Options& o) {
  bool help = false;
  std::optional<std::string> error;
  try {
    error = parseOptions(argc, argv, env.localSize(), o, help);
  } catch (const std::exception& e) {
    error = e.what();
  }
  exitEverywhereOnError(error);
  return !help;
}

struct Gpu {
  int index = -1;
  std::string name;
};

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
  exitEverywhereOnError(error);
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
  exitEverywhereOnError(error);
  return comms;
}

// The tuned backend's table, printed by rank 0 and kept in the JSON.
void describeTuned(const std::vector<std::unique_ptr<Communicator>>& comms, nlohmann::json& json,
                   bool root) {
  for (const auto& comm : comms) {
    // The ring backend is a TunedCommunicator too, with its fixed table (described above).
    const auto* tuned = dynamic_cast<const collectives::TunedCommunicator*>(&*comm);
    if (tuned == nullptr || comm->backendName() != name(collectives::Backend::kTuned)) continue;
    json["tuned"] = nlohmann::json::parse(tuningTableText(tuned->table()));
    if (root) std::cout << "#  tuned: " << summary(tuned->table()) << "\n";
  }
}

// The JSON document's description of the run; the results join it at the end.
nlohmann::json describeRun(const collectives::MpiEnvironment& env, const Options& o,
                           const Collective& collective, const Gpu& gpu) {
  std::vector<std::string> types, ops;
  for (const DataType type : o.types)
    types.emplace_back(name(type));
  for (const ReduceOp op : o.ops)
    ops.emplace_back(name(op));
  nlohmann::json json;
  json["program"] = std::string(collective.name) + "_perf";
  json["ranks"] = env.worldSize();
  json["nodes"] = env.nodeCount();
  json["host"] = env.hostName();
  json["mpi"] = mpiLibrary();
  json["datatype"] = joinNames(types, ",");
  json["op"] = joinNames(ops, ",");
  json["warmup_iters"] = o.warmupIters;
  json["iters"] = o.iters;
  json["agg_iters"] = o.aggIters;
  json["check_iters"] = o.checkIters;
  json["blocking"] = o.blocking;
  json["time"] = std::vector<std::string>{"rank0", "average", "min", "max"}[o.average];
  json["device"] = o.device;
  if (o.device == "cuda") json["gpu"] = {{"name", gpu.name}, {"rank0_device", gpu.index}};
  json["ring"] = {{"small_message_bytes", o.communicator.ringSmallMessageBytes},
                  {"chunk_bytes", o.communicator.ringChunkBytes},
                  {"network_chunk_bytes", o.communicator.ringNetworkChunkBytes},
                  {"pipeline_depth", o.communicator.ringPipelineDepth}};
  return json;
}

// nccl-tests' first lines: the run's parameters, then one line per rank (gathered on rank 0) with
// its process, host and device.
void printNcclTestsHeader(const collectives::MpiEnvironment& env, const Options& o,
                          const Gpu& gpu) {
  const bool root = env.worldRank() == 0;
  if (root) {
    std::cout << fmt::format(
        "# nThread {} nGpus {} minBytes {} maxBytes {} step: {}({}) warmup iters: {} iters: {} "
        "agg iters: {} validation: {} graph: {}\n",
        o.threads, o.gpus, o.minBytes, o.maxBytes, o.stepBytes > 0 ? o.stepBytes : o.stepFactor,
        o.stepBytes > 0 ? "bytes" : "factor", o.warmupIters, o.iters, o.aggIters, o.checkIters,
        o.cudaGraphLaunches);
    if (o.blocking)
      std::cout << "# Blocking Enabled: wait for completion and barrier after each collective\n";
    std::cout << "#\n# Using devices\n";
  }
  constexpr int kLine = 256;
  const std::string device = gpu.index < 0 ? std::string("cpu (host memory)")
                                           : fmt::format("{:>2} {}", gpu.index, gpu.name);
  std::string mine = fmt::format("#  Rank {:>2} Group  0 Pid {:>6} on {:>10} device {}",
                                 env.worldRank(), getpid(), env.hostName(), device);
  mine.resize(kLine - 1);
  std::vector<char> lines(root ? static_cast<std::size_t>(kLine) * env.worldSize() : 0);
  RINGTRAIN_MPI_CHECK(
      MPI_Gather(mine.c_str(), kLine, MPI_CHAR, lines.data(), kLine, MPI_CHAR, 0, MPI_COMM_WORLD));
  for (int r = 0; root && r < env.worldSize(); ++r)
    std::cout << std::string(lines.data() + static_cast<std::size_t>(r) * kLine) << "\n";
}

// ringtrain's own description of the run, after nccl-tests' lines.
void printRunHeader(const Options& o, const nlohmann::json& json) {
  std::cout << fmt::format("#\n# ringtrain {}: {} ranks on {} node(s), {}\n",
                           json["program"].get<std::string>(), json["ranks"].get<int>(),
                           json["nodes"].get<int>(), json["mpi"].get<std::string>());
  std::cout << fmt::format(
      "#  datatype {}, op {}, warm-up {} per size, iterations {} x {}, time: {} over ranks, "
      "checks {}{}\n",
      json["datatype"].get<std::string>(), json["op"].get<std::string>(), o.warmupIters, o.iters,
      o.aggIters, json["time"].get<std::string>(), o.checkIters,
      o.blocking ? ", a barrier after every call" : "");
  std::cout << fmt::format(
      "#  ring: recursive doubling up to {} B, chunks of {} B ({} B to and from other nodes), "
      "{} in flight\n",
      o.communicator.ringSmallMessageBytes, o.communicator.ringChunkBytes,
      o.communicator.ringNetworkChunkBytes, o.communicator.ringPipelineDepth);
  if (o.tune)
    std::cout << "#  --autotune: every tuned algorithm per size, the table to " << o.tuneOut
              << "\n";
  else
    std::cout << "#  backends (one table each): " << joinNames(o.backends, ", ") << "\n";
}

// The nodes the hierarchical backend found (or was told to simulate): into the JSON, and rank 0
// prints them.
void describeHierarchical(const std::vector<std::unique_ptr<Communicator>>& comms, const Options& o,
                          nlohmann::json& json, bool root) {
  const int perNode = o.communicator.test.ranksPerNode;
  for (const auto& comm : comms) {
    const auto* hierarchical = dynamic_cast<const collectives::HierarchicalCommunicator*>(&*comm);
    if (hierarchical == nullptr) continue;
    const auto& topology = hierarchical->topology();
    json["hierarchical"] = {{"nodes", topology.nodeCount()},
                            {"largest_node_ranks", topology.largestNodeSize()},
                            {"ranks_per_node_override", perNode}};
    if (root) {
      std::cout << fmt::format(
          "#  hierarchical: {} node(s) of up to {} ranks ({}), slices across nodes over MPI\n",
          topology.nodeCount(), topology.largestNodeSize(),
          perNode > 0 ? fmt::format("--ranks-per-node {}: simulated nodes", perNode)
                      : std::string("ranks sharing memory"));
    }
  }
}

// Bytes each rank must move through memory for a ring all-reduce of S bytes whose chunks are
// reduced while in cache: read its own input, read the incoming partial sums and the incoming
// reduced segments, write the partial sums and the result: 5(n-1)/n * S. At B bytes/s that takes
// 5(n-1)S/(nB), which is a busbw of 2B/5 (returned in GB/s).
double ringFloorGbps(double memoryBytesPerSecond) {
  return 0.4 * memoryBytesPerSecond / 1e9;
}

// Measures the memory bandwidth on every rank at once; returns one rank's bytes per second.
double reportMemoryBandwidth(nlohmann::json& json, bool root) {
  const double perRank = combineTime(measureMemoryBandwidth(), 1);
  json["memory_bandwidth_gbps_per_rank"] = perRank / 1e9;
  json["ring_floor_busbw_gbps"] = ringFloorGbps(perRank);
  if (root) {
    std::cout << fmt::format(
        "#  memory bandwidth (c = a + b, all ranks at once): {:.2f} GB/s per rank;"
        " ring all-reduce floor busbw = 2/5 of it = {:.2f} GB/s\n",
        perRank / 1e9, ringFloorGbps(perRank));
  }
  return perRank;
}

// The GPU's device-to-device copy bandwidth at `bytes` (GB/s), the reference on device buffers,
// taken on rank 0 alone so that no other rank's copy shares its GPU meanwhile.
double deviceCopyGbps(Buffers& buffers, std::size_t bytes, const Options& o, bool root) {
  double gbps = 0;
  if (root) {
    gbps = bench::deviceCopyBandwidth(buffers.data(0), buffers.data(1), bytes, o.warmupIters,
                                      o.iters) /
           1e9;
  }
  RINGTRAIN_MPI_CHECK(MPI_Bcast(&gbps, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD));
  return gbps;
}

// On device buffers, the GPU's copy bandwidth at every size of the sweep (by bytes), printed by
// rank 0 as comment lines before the tables.
std::map<std::size_t, double> measureDeviceCopies(Buffers& buffers, const Options& o, bool root) {
  std::map<std::size_t, double> gbps;
  if (root)
    std::cout << "#\n# d2d copy: cudaMemcpy device to device on rank 0, bytes read + written\n"
              << fmt::format("# {:>10}  {:>9}\n", "size (B)", "GB/s");
  for (const std::size_t bytes : sweepSizes(o)) {
    gbps[bytes] = deviceCopyGbps(buffers, bytes, o, root);
    if (root) std::cout << fmt::format("# {:>10}  {:>9.2f}\n", bytes, gbps[bytes]);
  }
  return gbps;
}

// nccl-tests' column headers; `backend` is named on the comment line above them.
void printTableHeader(const std::string& backend) {
  const char* const time = "time";
  std::cout << "#\n# backend: " << backend << "\n"
            << fmt::format("# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}{:>23}{:>31}{:>10}\n", "", "", "",
                           "", "", "out-of-place", "in-place", "")
            << fmt::format(
                   "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6} {:>6}  {:>7}  "
                   "{:>6}  {:>6} {:>6}\n",
                   "size", "count", "type", "redop", "root", time, "algbw", "busbw", "#wrong", time,
                   "algbw", "busbw", "#wrong")
            << fmt::format(
                   "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>5}  {:>7}  "
                   "{:>6}  {:>6}  {:>5}\n",
                   "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)",
                   "(GB/s)", "(GB/s)", "");
}

// A time as nccl-tests prints it: 7 wide, fewer decimals as it grows.
std::string formatTimeUs(double us) {
  if (us >= 10000.0) return fmt::format("{:>7.0f}", us);
  if (us >= 100.0) return fmt::format("{:>7.1f}", us);
  return fmt::format("{:>7.2f}", us);
}

// One size of one case on one backend, out of place and in place.
struct Row {
  std::string backend;
  const Case* c = nullptr;
  std::size_t bytes = 0;
  std::size_t count = 0;
  Measurement outOfPlace;
  Measurement inPlace;
  std::optional<double> copyGbps;  // on device buffers
};

// A row as nccl-tests prints it; root is -1, as for every collective without one.
void printRow(const Row& row) {
  std::cout << fmt::format("{:>12}  {:>12}  {:>8}  {:>6}  {:>6}", row.bytes, row.count,
                           choiceName(kTypeChoices, row.c->type), choiceName(kOpChoices, row.c->op),
                           -1);
  for (const Measurement* m : {&row.outOfPlace, &row.inPlace})
    std::cout << fmt::format("  {}  {:>6.2f}  {:>6.2f}  {:>5}", formatTimeUs(m->timeUs), m->algbw,
                             m->busbw, m->wrong);
  std::cout << "\n" << std::flush;
}

nlohmann::json toJson(const Measurement& m) {
  return nlohmann::json{
      {"time_us", m.timeUs}, {"algbw_gbps", m.algbw}, {"busbw_gbps", m.busbw}, {"wrong", m.wrong}};
}

nlohmann::json toJson(const Row& row) {
  nlohmann::json json{{"backend", row.backend},
                      {"type", std::string(name(row.c->type))},
                      {"op", std::string(name(row.c->op))},
                      {"bytes", row.bytes},
                      {"count", row.count},
                      {"out_of_place", toJson(row.outOfPlace)},
                      {"in_place", toJson(row.inPlace)}};
  if (row.copyGbps) json["d2d_copy_gbps"] = *row.copyGbps;
  return json;
}

// Rank 0's "k of n" on stderr, at most every --progress-seconds, so that stdout stays the table.
class Progress {
 public:
  Progress(std::size_t total, double everySeconds, bool root)
      : total_(total), every_(everySeconds), root_(root), start_(MPI_Wtime()), last_(start_) {}

  // One more measurement (a row) done: `what` names it.
  void done(const std::string& what) {
    ++done_;
    const double now = MPI_Wtime();
    if (!root_ || now - last_ < every_) return;
    last_ = now;
    const double elapsed = now - start_;
    const double left = elapsed / static_cast<double>(done_) * static_cast<double>(total_ - done_);
    std::cerr << fmt::format("allreduce_perf: {}/{} rows done ({}), {} elapsed, ~{} left\n", done_,
                             total_, what, minutes(elapsed), minutes(left))
              << std::flush;
  }

 private:
  static std::string minutes(double seconds) {
    const auto s = static_cast<long>(seconds);
    return fmt::format("{}:{:02}", s / 60, s % 60);
  }
  std::size_t total_, done_ = 0;
  double every_;
  bool root_;
  double start_, last_;
};

// What one backend's table gathers: nccl-tests' summary lines, and the rows for the JSON.
struct Table {
  double busbwSum = 0;
  int measurements = 0;
  int failedMeasurements = 0;  // with any wrong value
  std::uint64_t wrongValues = 0;

  void add(const Row& row) {
    for (const Measurement* m : {&row.outOfPlace, &row.inPlace}) {
      busbwSum += m->busbw;
      ++measurements;
      failedMeasurements += m->wrong > 0;
      wrongValues += static_cast<std::uint64_t>(std::max<std::int64_t>(m->wrong, 0));
    }
  }
};

// What the run needs to fill one table.
struct SweepContext {
  const Bench& bench;
  const std::vector<Case>& cases;
  const std::map<std::size_t, double>& copyGbps;  // on device buffers
  Progress& progress;
  nlohmann::json& rows;
};

// One backend's table: every case, every size; rank 0 prints the rows as they come.
Table runTable(const SweepContext& s, Communicator& comm, const std::string& backend, bool root) {
  const std::vector<std::size_t> sizes = sweepSizes(s.bench.options);
  Table table;
  for (const Case& c : s.cases) {
    for (const std::size_t size : sizes) {
      Row row;
      row.backend = backend;
      row.c = &c;
      row.count = size / sizeOf(c.type);
      row.bytes = row.count * sizeOf(c.type);
      if (const auto copy = s.copyGbps.find(size); copy != s.copyGbps.end())
        row.copyGbps = copy->second;
      row.outOfPlace = measure(s.bench, comm, c, row.count, false);
      row.inPlace = measure(s.bench, comm, c, row.count, true);
      if (root) printRow(row);
      table.add(row);
      s.rows.push_back(toJson(row));
      s.progress.done(fmt::format("{} {} {} {} B", backend, name(c.type), name(c.op), row.bytes));
    }
  }
  return table;
}

// nccl-tests' closing lines of a table. "Out of bounds values" is its count: the measurements
// with wrong values, counted once by every rank.
void printTableSummary(const Table& table, int ranks) {
  const int errors = table.failedMeasurements * ranks;
  std::cout << fmt::format("# Out of bounds values : {} {}\n", errors, errors ? "FAILED" : "OK")
            << fmt::format("# Avg bus bandwidth    : {:g} \n",
                           table.busbwSum / std::max(1, table.measurements))
            << "#\n";
}

// Each backend's out-of-place busbw divided by the first backend's, size by size (one case).
void printRelativeBusbw(const nlohmann::json& rows, const Options& o) {
  std::map<std::size_t, std::map<std::string, double>> busbw;  // bytes -> backend -> GB/s
  for (const auto& row : rows)
    busbw[row["bytes"]][row["backend"]] = row["out_of_place"]["busbw_gbps"];
  std::cout << "#\n# out-of-place busbw relative to " << o.backends[0] << ":\n"
            << fmt::format("# {:>12}", "size");
  for (std::size_t b = 1; b < o.backends.size(); ++b)
    std::cout << fmt::format(" {:>12}", o.backends[b] + "/" + o.backends[0]);
  std::cout << "\n";
  for (auto& [bytes, byBackend] : busbw) {
    std::cout << fmt::format("# {:>12}", bytes);
    const double first = byBackend[o.backends[0]];
    for (std::size_t b = 1; b < o.backends.size(); ++b)
      std::cout << fmt::format(" {:>12.2f}", first > 0 ? byBackend[o.backends[b]] / first : 0.0);
    std::cout << "\n";
  }
}

// The ring's out-of-place busbw at 16 MiB and more as a share of its memory-traffic floor.
void printRingFloorShares(const nlohmann::json& rows, double memoryBytesPerSecond) {
  const double floorGbps = ringFloorGbps(memoryBytesPerSecond);
  std::cout << "#\n# ring busbw as a share of the memory-traffic floor ("
            << fmt::format("{:.2f}", floorGbps) << " GB/s), sizes >= 16 MiB:\n";
  for (const auto& row : rows) {
    if (row["backend"] == "ring" && row["bytes"].get<std::size_t>() >= (std::size_t{16} << 20)) {
      std::cout << fmt::format("# {:>12} {:>6.0f}%\n", row["bytes"].get<std::size_t>(),
                               100.0 * row["out_of_place"]["busbw_gbps"].get<double>() / floorGbps);
    }
  }
}

bool writeJson(const std::string& path, const nlohmann::json& json) {
  std::ofstream file(path);
  file << json.dump(2) << "\n";
  if (file) return true;
  logLine(LogLevel::kError, "error: cannot write " + path);
  return false;
}

// Every (type, op) of -d and -o, with this rank's input and the expected result.
std::vector<Case> makeCases(const Options& o, const Collective& collective, int rank, int ranks) {
  std::vector<Case> cases;
  for (const DataType type : o.types)
    for (const ReduceOp op : o.ops)
      cases.push_back({type, op, collective.patterns(type, op, rank, ranks)});
  return cases;
}

// ---- --autotune: the tuned backend's table ---------------------------------------------------
using collectives::AllreduceAlgorithm;

// One algorithm of the tuned backend, alone at every size it can take.
struct TuneCandidate {
  AllreduceAlgorithm algorithm;
  std::unique_ptr<Communicator> comm;
  bool takes(std::size_t bytes) const {
    return algorithm != AllreduceAlgorithm::kRecursiveDoubling ||
           bytes <= collectives::kMaxRecursiveDoublingBytes;
  }
};

// Every algorithm, but the hierarchical one only across nodes (on one node it is the ring in two
// passes).
std::vector<TuneCandidate> tuneCandidates(const Options& o, const collectives::RankLayout& layout) {
  std::vector<TuneCandidate> candidates;
  for (const auto& [algorithm, label] : collectives::kAllreduceAlgorithmNames) {
    if (algorithm == AllreduceAlgorithm::kHierarchical && layout.oneNode()) continue;
    candidates.push_back(
        {algorithm, std::make_unique<collectives::TunedCommunicator>(
                        MPI_COMM_WORLD, o.communicator, singleAlgorithmTable(layout, algorithm))});
  }
  return candidates;
}

// The median of `times` (infinity for none).
double median(std::vector<double> times) {
  if (times.empty()) return HUGE_VAL;
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// One size's median times per call (us) of every candidate, in place and out of place;
// infinity where a candidate does not take the size.
struct SizeTimes {
  std::vector<double> inPlace, outOfPlace;
};

// One size, --tune-rounds rounds, each running every candidate once (interleaved). Adds the
// wrong values of the checked calls to `wrong`.
SizeTimes tuneSize(const Bench& bench, const std::vector<TuneCandidate>& candidates, const Case& c,
                   std::size_t count, std::uint64_t& wrong) {
  std::vector<std::vector<double>> inPlace(candidates.size()), outOfPlace(candidates.size());
  for (int round = 0; round < bench.options.tuneRounds; ++round) {
    for (std::size_t i = 0; i < candidates.size(); ++i) {
      if (!candidates[i].takes(count * sizeOf(c.type))) continue;
      const Measurement out = measure(bench, *candidates[i].comm, c, count, false);
      const Measurement in = measure(bench, *candidates[i].comm, c, count, true);
      outOfPlace[i].push_back(out.timeUs);
      inPlace[i].push_back(in.timeUs);
      wrong += static_cast<std::uint64_t>(std::max<std::int64_t>(out.wrong, 0) +
                                          std::max<std::int64_t>(in.wrong, 0));
    }
  }
  SizeTimes times;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    times.inPlace.push_back(median(inPlace[i]));
    times.outOfPlace.push_back(median(outOfPlace[i]));
  }
  return times;
}

// The fastest candidate, unless `previous` (the last size's choice, -1 for none) is within
// --tune-margin of it: boundaries move only for a real difference, not for noise.
std::size_t pickCandidate(const std::vector<double>& times, int previous, double margin) {
  const auto best =
      static_cast<std::size_t>(std::min_element(times.begin(), times.end()) - times.begin());
  if (previous >= 0 && times[static_cast<std::size_t>(previous)] <= times[best] * (1 + margin))
    return static_cast<std::size_t>(previous);
  return best;
}

// Adjacent sizes with one algorithm become one rule; the last rule holds every larger size,
// except recursive doubling, which stops at the largest size measured (the ring takes the rest).
std::vector<collectives::TuningRule> mergeRules(
    const std::vector<std::pair<std::size_t, AllreduceAlgorithm>>& choices) {
  std::vector<collectives::TuningRule> rules;
  for (const auto& [bytes, algorithm] : choices) {
    if (!rules.empty() && rules.back().algorithm == algorithm)
      rules.back().maxBytes = bytes;
    else
      rules.push_back({bytes, algorithm});
  }
  if (rules.back().algorithm == AllreduceAlgorithm::kRecursiveDoubling)
    rules.push_back({collectives::kUnboundedBytes, AllreduceAlgorithm::kRing});
  rules.back().maxBytes = collectives::kUnboundedBytes;
  return rules;
}

void printTuneHeader(const std::vector<TuneCandidate>& candidates) {
  std::cout << "#\n# tune: median us per call, in place (which decides) / out of place\n"
            << fmt::format("# {:>10}", "size (B)");
  for (const auto& candidate : candidates)
    std::cout << fmt::format(" {:>22}", name(candidate.algorithm));
  std::cout << fmt::format(" {:>18}\n", "chosen");
}

void printTuneRow(std::size_t bytes, const SizeTimes& times, const std::string& chosen) {
  std::cout << fmt::format("{:>12}", bytes);
  for (std::size_t i = 0; i < times.inPlace.size(); ++i) {
    const std::string cell =
        std::isinf(times.inPlace[i])
            ? "-"
            : fmt::format("{:.2f} / {:.2f}", times.inPlace[i], times.outOfPlace[i]);
    std::cout << fmt::format(" {:>22}", cell);
  }
  std::cout << fmt::format(" {:>18}\n", chosen) << std::flush;
}

// Times every candidate at every size, picks one per size, and has rank 0 write the table to
// --tune-out (and the times to --json). Returns the wrong values found by the checked calls.
std::uint64_t tune(const Bench& bench, const Case& c, nlohmann::json& json, bool root) {
  const Options& o = bench.options;
  const collectives::RankLayout layout =
      collectives::rankLayoutOf(MPI_COMM_WORLD, o.communicator.test.ranksPerNode);
  const std::vector<TuneCandidate> candidates = tuneCandidates(o, layout);
  if (root) printTuneHeader(candidates);
  std::vector<std::pair<std::size_t, AllreduceAlgorithm>> choices;
  std::uint64_t wrong = 0;
  int previous = -1;
  for (const std::size_t size : sweepSizes(o)) {
    const std::size_t count = size / sizeOf(c.type);
    // In place decides: the trainer reduces its gradient buckets in place.
    const SizeTimes times = tuneSize(bench, candidates, c, count, wrong);
    previous = static_cast<int>(pickCandidate(times.inPlace, previous, o.tuneMargin));
    const AllreduceAlgorithm chosen = candidates[static_cast<std::size_t>(previous)].algorithm;
    choices.emplace_back(count * sizeOf(c.type), chosen);
    if (root) printTuneRow(count * sizeOf(c.type), times, std::string(name(chosen)));
    nlohmann::json row{{"bytes", count * sizeOf(c.type)}, {"chosen", name(chosen)}};
    for (std::size_t i = 0; i < candidates.size(); ++i) {
      if (std::isinf(times.inPlace[i])) continue;
      const std::string algorithm(name(candidates[i].algorithm));
      row["in_place_us"][algorithm] = times.inPlace[i];
      row["out_of_place_us"][algorithm] = times.outOfPlace[i];
    }
    json["tune"].push_back(row);
  }
  const collectives::TuningTable table{layout, collectives::cpuModel(),
                                       collectives::ringtrainBuild(), mergeRules(choices)};
  json["tuning_table"] = nlohmann::json::parse(tuningTableText(table));
  if (root) {
    writeTuningFile(o.tuneOut, table);
    std::cout << "# tune: wrote " << o.tuneOut << ": " << summary(table) << "\n";
  }
  return wrong;
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
  Progress progress(comms.size() * cases.size() * sweepSizes(o).size(), o.progressSeconds, root);
  json["results"] = nlohmann::json::array();
  const SweepContext sweep{bench, cases, copyGbps, progress, json["results"]};
  std::uint64_t wrongValues = 0;
  for (std::size_t b = 0; b < comms.size(); ++b) {
    if (root) printTableHeader(o.backends[b]);
    const Table table = runTable(sweep, *comms[b], o.backends[b], root);
    if (root) printTableSummary(table, env.worldSize());
    json["avg_busbw_gbps"][o.backends[b]] = table.busbwSum / std::max(1, table.measurements);
    wrongValues += table.wrongValues;
  }

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
}  // namespace ringtrain

int main(int argc, char** argv) {
  try {
    return ringtrain::run(argc, argv);
  } catch (const std::exception& e) {
    ringtrain::collectives::abortJob(std::string("allreduce_perf: ") + e.what());
  }
}
