#include "src/bench/allreduce_perf_options.h"

#include <fmt/format.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <exception>
#include <iostream>

#include "base/byte_size.h"
#include "base/physical_memory.h"
#include "options/startup_errors.h"

namespace ringtrain::allreduce_perf {

std::string joinNames(const std::vector<std::string>& names, const std::string& separator) {
  std::string joined;
  for (const auto& name : names)
    joined += (joined.empty() ? "" : separator) + name;
  return joined;
}

namespace {

namespace po = boost::program_options;

// More sizes than this in one sweep are refused: an -i far below -e would run for days.
constexpr std::size_t kMaxSizes = 10000;

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

}  // namespace

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

namespace {

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

}  // namespace

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
  options::exitEverywhereOnError(error);
  return !help;
}

}  // namespace ringtrain::allreduce_perf
