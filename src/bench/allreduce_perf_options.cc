#include "src/bench/allreduce_perf_options.h"

#include <fmt/format.h>

#include <algorithm>
#include <exception>

#include "base/byte_size.h"
#include "base/physical_memory.h"
#include "options/option_table.h"
#include "options/startup_errors.h"
#include "src/bench/standalone_options.h"

namespace ringtrain::allreduce_perf {

std::string joinNames(const std::vector<std::string>& names, const std::string& separator) {
  std::string joined;
  for (const auto& name : names)
    joined += (joined.empty() ? "" : separator) + name;
  return joined;
}

namespace {

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

// What the table reads: the options, and the sizes and lists as typed (read after parsing).
struct Parsed {
  Options o;
  OptionText text;
  Parsed() { text.backends = joinNames(o.backends, ","); }
};

using Option = options::Option<Parsed>;

// A number the later checks judge, in this program's words.
template <class Field>
Option anyNumber(std::string name, Field field, std::string help) {
  return bench::anyNumber<Parsed>(std::move(name), field, std::move(help));
}

// `option`, remembering in `given` that the command line gave it.
Option noticed(Option option, bool OptionText::*given) {
  option.read = [read = option.read, given](Parsed& p, const std::string& text) {
    p.text.*given = true;
    return read(p, text);
  };
  return option;
}

// nccl-tests' options, with its letters and meanings (its README's "Arguments").
options::Table<Parsed> ncclTestsOptions() {
  const std::string types = "type: " + choiceList(kTypeChoices) + " (or float32, float16, ...)";
  const std::string ops = "reduction: " + choiceList(kOpChoices);
  const Option blocking = bench::valued(options::boolean<Parsed>(
      "blocking", RINGTRAIN_FIELD(o.blocking),
      "1: a barrier after every call (the calls themselves always complete before returning)"));
  // clang-format off
  return bench::inGroup<Parsed>("nccl-tests options (as all_reduce_perf's)", {
      bench::lettered('t', anyNumber("nthreads", RINGTRAIN_FIELD(o.threads), "threads per process: 1 only (one rank per process; more ranks: mpirun -np)")),
      bench::lettered('g', anyNumber("ngpus", RINGTRAIN_FIELD(o.gpus), "GPUs per thread: 1 only (one buffer per rank; more ranks: mpirun -np)")),
      bench::lettered('b', options::text<Parsed>("minbytes", RINGTRAIN_FIELD(text.minBytes), "smallest size (8, 64K, 1.5M, 1G); sizes are whole elements of --datatype: at least one, others rounded down")),
      bench::lettered('e', options::text<Parsed>("maxbytes", RINGTRAIN_FIELD(text.maxBytes), "largest size")),
      bench::lettered('i', options::text<Parsed>("stepbytes", RINGTRAIN_FIELD(text.stepBytes), "fixed increment between sizes (instead of --stepfactor)")),
      bench::lettered('f', noticed(anyNumber("stepfactor", RINGTRAIN_FIELD(o.stepFactor), "multiplication factor between sizes, at least 2"), &OptionText::stepFactorGiven)),
      bench::lettered('n', anyNumber("iters", RINGTRAIN_FIELD(o.iters), "timed iterations per size")),
      bench::lettered('m', anyNumber("agg_iters", RINGTRAIN_FIELD(o.aggIters), "calls per timed iteration (nccl-tests groups them; here they run one after another)")),
      bench::lettered('w', anyNumber("warmup_iters", RINGTRAIN_FIELD(o.warmupIters), "untimed calls per size, backend and placement")),
      bench::lettered('c', anyNumber("check", RINGTRAIN_FIELD(o.checkIters), "checked calls per measurement (0: no check, #wrong -1)")),
      bench::lettered('d', options::text<Parsed>("datatype", RINGTRAIN_FIELD(text.type), types)),
      bench::lettered('o', options::text<Parsed>("op", RINGTRAIN_FIELD(text.op), ops)),
      bench::lettered('a', anyNumber("average", RINGTRAIN_FIELD(o.average), "time reported: 0 rank 0, 1 average, 2 min, 3 max over ranks")),
      bench::lettered('z', blocking),
      bench::lettered('G', anyNumber("cudagraph", RINGTRAIN_FIELD(o.cudaGraphLaunches), "CUDA graph launches: 0 only (refused otherwise: no backend here captures graphs)")),
      bench::lettered('N', anyNumber("run_cycles", RINGTRAIN_FIELD(o.runCycles), "passes over the sizes: 1 only (run the program again for more)")),
      bench::lettered('C', anyNumber("report_cputime", RINGTRAIN_FIELD(o.reportCpuTime), "0 only: times are wall-clock (the calls block until complete, so CPU time adds nothing)")),
      bench::lettered('T', anyNumber("timeout", RINGTRAIN_FIELD(o.timeoutSeconds), "0 only (no timeout; mpirun --timeout or timeout(1) bound a run)")),
      bench::lettered('p', anyNumber("parallel_init", RINGTRAIN_FIELD(o.parallelInit), "0 only: one rank per process sets up its communicators itself")),
      bench::lettered('R', anyNumber("local_register", RINGTRAIN_FIELD(o.localRegister), "0 only: no backend here registers buffers")),
  });
  // clang-format on
}

// ringtrain's own options: which backends, their tuning, and what else to report; the test hook.
options::Table<Parsed> ringtrainOptions() {
  const std::string device =
      "cpu: host buffers (backends " + collectives::joinNames(collectives::hostBackends()) +
      "); cuda: cudaMalloc'd buffers on GPU local_rank % devices (backends " +
      collectives::joinNames(collectives::deviceBackends()) + "; default nccl)";
  Option wrongRank = anyNumber("test-wrong-rank", RINGTRAIN_FIELD(o.testWrongRank), "");
  wrongRank.hidden = true;  // the test hook: parsed, never shown
  // clang-format off
  return bench::inGroup<Parsed>("ringtrain options", {
      noticed(options::text<Parsed>("backends", RINGTRAIN_FIELD(text.backends), "comma-separated backends, one table each, in this order (default: the backend training uses, tuned; with --device cuda nccl)"), &OptionText::backendsGiven),
      options::text<Parsed>("ring-small-bytes", RINGTRAIN_FIELD(text.smallBytes), "ring: largest all-reduce done by recursive doubling (bytes)"),
      options::text<Parsed>("ring-chunk-bytes", RINGTRAIN_FIELD(text.chunkBytes), "ring: bytes per pipelined message"),
      options::text<Parsed>("ring-network-chunk-bytes", RINGTRAIN_FIELD(text.networkChunkBytes), "ring: bytes per message to a neighbour on another node (0: as --ring-chunk-bytes)"),
      options::text<Parsed>("also-ring-network-chunk-bytes", RINGTRAIN_FIELD(text.networkVariants), "comma-separated sizes: one more ring table per size (ring-net<size>), the ring with that --ring-network-chunk-bytes"),
      anyNumber("ring-depth", RINGTRAIN_FIELD(o.communicator.ringPipelineDepth), "ring: chunk receives in flight"),
      anyNumber("ranks-per-node", RINGTRAIN_FIELD(o.communicator.test.ranksPerNode), "hierarchical, benchmarks only: every N consecutive ranks form a node (0: the real nodes)"),
      options::text<Parsed>("json", RINGTRAIN_FIELD(o.jsonPath), "also write the results to this JSON file"),
      options::boolean<Parsed>("membw", RINGTRAIN_FIELD(o.memoryBandwidth), "measure memory bandwidth first and report the ring's memory-traffic floor"),
      anyNumber("progress-seconds", RINGTRAIN_FIELD(o.progressSeconds), "rank 0 says on stderr how many measurements are done, at most this often (0: after each)"),
      options::text<Parsed>("device", RINGTRAIN_FIELD(o.device), device),
      options::text<Parsed>("tuning-file", RINGTRAIN_FIELD(o.communicator.tuningFile), "tuned: the tuning table to use (default: the built-in one)"),
      options::boolean<Parsed>("autotune", RINGTRAIN_FIELD(o.tune), "instead of the tables: time every algorithm of the tuned backend at every size (the first -d and -o) and write the fastest per size to --tune-out"),
      options::text<Parsed>("tune-out", RINGTRAIN_FIELD(o.tuneOut), "--autotune: the table's file"),
      anyNumber("tune-rounds", RINGTRAIN_FIELD(o.tuneRounds), "--autotune: interleaved rounds per size (the median counts)"),
      anyNumber("tune-margin", RINGTRAIN_FIELD(o.tuneMargin), "--autotune: a size keeps the previous size's algorithm unless another is this share faster"),
      wrongRank,
  });
  // clang-format on
}

// Every option, in --help's order.
const options::Table<Parsed>& optionTable() {
  static const options::Table<Parsed> table = [] {
    options::Table<Parsed> all = ncclTestsOptions();
    for (Option& option : ringtrainOptions())
      all.push_back(std::move(option));
    return all;
  }();
  return table;
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

const options::Program kProgram{
    "allreduce_perf",
    "usage: mpirun -np N allreduce_perf [options]\n"
    "allreduce_perf: all-reduce bus bandwidth, nccl-tests' all_reduce_perf table per backend\n"
    "(defaults -b 8 -e 256M -f 2; nccl-tests' are -b 32M -e 32M -i 1M; one table, of tuned, unless "
    "--backends)"};

// Returns an error message for the first bad option, or nullopt; sets `help` for --help.
std::optional<std::string> parseOptions(int argc, char** argv, int ranksOnNode, Options& o,
                                        bool& help) {
  Parsed parsed;
  if (auto error = bench::parseStandalone(kProgram, optionTable(), argc, argv, parsed, help))
    return error;
  if (help) return std::nullopt;
  o = parsed.o;
  if (auto e = readSizes(parsed.text, o)) return e;
  if (auto e = readBackends(parsed.text, o)) return e;
  if (auto e = checkRanges(o)) return e;
  if (auto e = readTypeAndOp(parsed.text, o)) return e;
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
