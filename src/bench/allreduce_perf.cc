// allreduce_perf: all-reduce bus bandwidth of every backend, side by side, in the manner of
// nccl-tests' all_reduce_perf (same flags, columns and formulas):
//   algbw = bytes / time,   busbw = algbw * 2(n-1)/n
// busbw is what each rank's link must carry, so it can be compared with the hardware's bandwidth
// whatever the number of ranks. For every size each backend runs out of place and in place; the
// result of a separate, checked run is compared with the exact expected values on every rank
// (#wrong, summed over ranks, which also counts ranks whose bytes differ from rank 0's).
// As in nccl-tests, one harness times, checks and prints whatever collective a small struct
// describes (Collective; all-reduce is kAllReduce).
//
//   mpirun -np 2 build/bin/allreduce_perf -b 8 -e 256M -f 2 --json out.json
//   mpirun -np 4 build/bin/allreduce_perf --backends mpi,ring,hierarchical --ranks-per-node 2
// (--ranks-per-node lets one machine stand in for several nodes: 4 ranks as 2 nodes x 2.)
//   mpirun -np 2 build/bin/allreduce_perf --also-ring-network-chunk-bytes 512K
// (a column "ring-net512K": the ring with 512 KiB messages to neighbours on other nodes, next to
// the ring with its default network chunks, to compare chunkings in one run.)
//   mpirun -np 2 build/bin/allreduce_perf --device cuda --backends nccl,hierarchical-nccl
// (--device cuda: buffers from cudaMalloc on GPU local_rank % devices, for the device backends;
// each row then also shows the GPU's device-to-device copy bandwidth at that size, the figure to
// hold the bus bandwidth against. The results are copied back to the host to be checked.)
#include <fmt/format.h>

#include <algorithm>
#include <boost/program_options.hpp>
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
#include <vector>

#include <mpi.h>

#include "collectives/aligned_buffer.h"
#include "collectives/communicator.h"
#include "collectives/environment.h"
#include "collectives/fingerprint.h"
#include "collectives/float16.h"
#include "collectives/hierarchical_communicator.h"
#include "collectives/mpi_check.h"
#include "src/bench/bench_device.h"
#include "src/common/physical_memory.h"
#include "src/common/startup_errors.h"

namespace ringtrain {
namespace {

namespace po = boost::program_options;
using collectives::AlignedBuffer;
using collectives::Communicator;
using collectives::DataType;
using collectives::ReduceOp;

struct Options {
  std::size_t minBytes = 8;
  std::size_t maxBytes = std::size_t{256} << 20;
  std::size_t stepFactor = 2;
  int warmupIters = 5;
  int iters = 20;
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  bool check = true;
  int average = 1;  // 0: rank 0's time, 1: average over ranks, 2: minimum, 3: maximum
  // The hierarchical backend only when asked for: on one node it is the ring in two passes.
  std::vector<std::string> backends = {"mpi", "ring"};
  // Extra columns by label ("ring-net512K"): the ring backend with another ringNetworkChunkBytes.
  std::map<std::string, std::size_t> ringNetworkVariants;
  collectives::CommunicatorOptions communicator;
  std::string jsonPath;
  bool memoryBandwidth = false;
  // "cpu": host buffers and the host backends; "cuda": device buffers and the device backends.
  std::string device = "cpu";
};

// "8", "64K", "256M", "1G" (binary multiples, as nccl-tests reads them).
std::optional<std::size_t> parseBytes(const std::string& text) {
  if (text.empty()) return std::nullopt;
  std::size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits])))
    ++digits;
  if (digits == 0) return std::nullopt;
  std::size_t value = std::stoull(text.substr(0, digits));
  const std::string suffix = text.substr(digits);
  if (suffix.empty() || suffix == "B") return value;
  const char unit = static_cast<char>(std::toupper(static_cast<unsigned char>(suffix[0])));
  if (suffix.size() > 2 || (suffix.size() == 2 && std::toupper(suffix[1]) != 'B'))
    return std::nullopt;
  if (unit == 'K') return value << 10;
  if (unit == 'M') return value << 20;
  if (unit == 'G') return value << 30;
  return std::nullopt;
}

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
  std::string minBytes = "8", maxBytes = "256M", type = "float", op = "sum", backends;
  std::string smallBytes, chunkBytes, networkChunkBytes, networkVariants;
  bool backendsGiven = false;
};

std::string joinNames(const std::vector<std::string>& names, const std::string& separator) {
  std::string joined;
  for (const auto& name : names)
    joined += (joined.empty() ? "" : separator) + name;
  return joined;
}

// The options, bound to `o` and `text`, which must outlive the parse.
po::options_description describeOptions(Options& o, OptionText& text) {
  po::options_description description("allreduce_perf options");
  auto add = description.add_options();
  add("help,h", "print this help");
  add("minbytes,b", po::value(&text.minBytes)->default_value(text.minBytes),
      "smallest size (8, 64K, 1M, 1G); sizes are whole elements of --datatype: at least one, "
      "others rounded down");
  add("maxbytes,e", po::value(&text.maxBytes)->default_value(text.maxBytes), "largest size");
  add("stepfactor,f", po::value(&o.stepFactor)->default_value(o.stepFactor),
      "size multiplier between rows");
  add("warmup_iters,w", po::value(&o.warmupIters)->default_value(o.warmupIters),
      "untimed iterations per size");
  add("iters,n", po::value(&o.iters)->default_value(o.iters), "timed iterations per size");
  add("datatype,d", po::value(&text.type)->default_value(text.type),
      "float32|float64|float16|bfloat16|int32|int64 (nccl-tests names work too)");
  add("op,o", po::value(&text.op)->default_value(text.op), "sum|avg|min|max");
  add("check,c", po::value(&o.check)->default_value(o.check), "check every result (1) or not (0)");
  add("average,a", po::value(&o.average)->default_value(o.average),
      "time reported: 0 rank 0, 1 average, 2 min, 3 max over ranks");
  add("backends", po::value(&text.backends)->default_value(text.backends),
      "comma-separated backends to compare");
  add("ring-small-bytes", po::value(&text.smallBytes),
      "ring: largest all-reduce done by recursive doubling (bytes)");
  add("ring-chunk-bytes", po::value(&text.chunkBytes), "ring: bytes per pipelined message");
  add("ring-network-chunk-bytes", po::value(&text.networkChunkBytes),
      "ring: bytes per message to a neighbour on another node (0: as --ring-chunk-bytes)");
  add("also-ring-network-chunk-bytes", po::value(&text.networkVariants),
      "comma-separated sizes: one more ring column per size (ring-net<size>), the ring with "
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
  const std::string device =
      "cpu: host buffers (backends " + collectives::joinNames(collectives::hostBackends()) +
      "); cuda: cudaMalloc'd buffers on GPU local_rank % devices (backends " +
      collectives::joinNames(collectives::deviceBackends()) + "; default nccl)";
  add("device", po::value(&o.device)->default_value(o.device), device.c_str());
  return description;
}

// Reads size option `name` into `out`; an error message when `value` is no size.
std::optional<std::string> readSize(const std::string& value, const char* name, std::size_t& out) {
  const auto parsed = parseBytes(value);
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

// The sizes: the sweep's range, the ring's messages and the extra ring columns.
std::optional<std::string> readSizes(const OptionText& text, Options& o) {
  collectives::CommunicatorOptions& ring = o.communicator;
  if (auto e = readSize(text.minBytes, "minbytes", o.minBytes)) return e;
  if (auto e = readSize(text.maxBytes, "maxbytes", o.maxBytes)) return e;
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

std::optional<std::string> checkRanges(const Options& o) {
  if (o.minBytes > o.maxBytes) return "--minbytes is larger than --maxbytes";
  if (o.stepFactor < 2) return "--stepfactor must be at least 2";
  if (o.iters < 1 || o.warmupIters < 0)
    return "--iters must be at least 1 and --warmup_iters at least 0";
  if (o.average < 0 || o.average > 3) return "--average must be 0, 1, 2 or 3";
  if (o.communicator.ringPipelineDepth < 1) return "--ring-depth must be at least 1";
  if (o.communicator.test.ranksPerNode < 0) return "--ranks-per-node must be 0 or more";
  return std::nullopt;
}

std::optional<std::string> readTypeAndOp(const OptionText& text, Options& o) {
  const auto parsedType = collectives::parseDataType(text.type);
  if (!parsedType) return "--datatype: unknown type '" + text.type + "'";
  o.type = *parsedType;
  const auto parsedOp = collectives::parseReduceOp(text.op);
  if (!parsedOp) return "--op: unknown reduction '" + text.op + "' (sum, avg, min, max)";
  o.op = *parsedOp;
  return std::nullopt;
}

// --device and --backends: the backends that the device's buffers take (collectives'
// hostBackends or deviceBackends), then the extra ring columns right after the ring they vary.
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

// The sweep's sizes against the data type and the machine. Sizes are whole elements of
// --datatype: a size below one element is refused, any other is rounded down to whole elements
// (as nccl-tests does). Every rank holds a send and a receive buffer of --maxbytes in host memory.
std::optional<std::string> sizeProblem(const Options& o, int ranksOnNode) {
  const std::size_t e = sizeOf(o.type);
  if (o.minBytes < e) {
    return fmt::format(
        "--minbytes {}: smaller than one {} element ({} bytes); sizes are whole "
        "elements of --datatype",
        o.minBytes, collectives::name(o.type), e);
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
  const po::options_description description = describeOptions(o, text);
  try {
    po::variables_map vm;
    po::store(po::command_line_parser(argc, argv).options(description).run(), vm);
    po::notify(vm);
    text.backendsGiven = !vm["backends"].defaulted();
    if (vm.count("help")) {
      help = true;
      std::cout << description << "\n";
      return std::nullopt;
    }
  } catch (const po::error& e) {
    return std::string(e.what());
  }
  if (auto e = readSizes(text, o)) return e;
  if (auto e = checkRanges(o)) return e;
  if (auto e = readTypeAndOp(text, o)) return e;
  if (auto e = sizeProblem(o, ranksOnNode)) return e;
  return readBackends(text, o);
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
  const std::uint64_t hash = collectives::fingerprint(result, count * elementSize);
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
  double algbw = 0;  // GB/s
  double busbw = 0;  // GB/s
  std::uint64_t wrong = 0;
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
  // Buffer `which`'s first `bytes` bytes in host memory.
  const std::byte* onHost(int which, std::size_t bytes) {
    if (device_[which]) bench::copyToHost(host_[which].data(), device_[which]->data(), bytes);
    return host_[which].data();
  }

 private:
  AlignedBuffer host_[2];
  std::unique_ptr<bench::DeviceBytes> device_[2];
};

// What every measurement of a run shares.
struct Bench {
  const Collective& collective;
  const Options& options;
  Buffers& buffers;
  const Patterns& patterns;
};

// Seconds per call on `count` elements into buffer `result`, after the untimed warm-up calls,
// combined over the ranks as --average says.
double timeCalls(const Bench& bench, Communicator& comm, int result, std::size_t count) {
  const Options& o = bench.options;
  std::byte* send = bench.buffers.data(0);
  std::byte* recv = bench.buffers.data(result);
  for (int i = 0; i < o.warmupIters; ++i)
    bench.collective.run(comm, send, recv, count, o.type, o.op);
  comm.barrier();
  const double start = MPI_Wtime();
  for (int i = 0; i < o.iters; ++i)
    bench.collective.run(comm, send, recv, count, o.type, o.op);
  return combineTime((MPI_Wtime() - start) / o.iters, o.average);
}

// One more call on fresh inputs, checked: its wrong values summed over the ranks.
std::uint64_t checkCall(const Bench& bench, Communicator& comm, int result, std::size_t count) {
  const Options& o = bench.options;
  const std::size_t e = sizeOf(o.type);
  bench.buffers.fillSend(count, bench.patterns.input, e);
  bench.collective.run(comm, bench.buffers.data(0), bench.buffers.data(result), count, o.type,
                       o.op);
  std::uint64_t wrong =
      bench.collective.check(bench.buffers.onHost(result, count * e), count, bench.patterns, e);
  std::uint64_t total = 0;
  RINGTRAIN_MPI_CHECK(MPI_Allreduce(&wrong, &total, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD));
  return total;
}

Measurement measure(const Bench& bench, Communicator& comm, std::size_t count, bool inPlace) {
  const std::size_t e = sizeOf(bench.options.type);
  const int result = inPlace ? 0 : 1;
  bench.buffers.fillSend(count, bench.patterns.input, e);
  const double perIteration = timeCalls(bench, comm, result, count);
  Measurement m;
  m.timeUs = perIteration * 1e6;
  m.algbw = static_cast<double>(count * e) / perIteration / 1e9;
  m.busbw = bench.collective.busBandwidth(m.algbw, comm.size());
  if (bench.options.check) m.wrong = checkCall(bench, comm, result, count);
  return m;
}

// Streams c = a + b over arrays far larger than the caches on every rank at once (the ranks
// share the memory bus) and returns the best bytes-per-second of one rank, counting 3 streams.
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

// One communicator per column; a ring-net<size> column is the ring with those network chunks.
std::vector<std::unique_ptr<Communicator>> makeCommunicators(const Options& o) {
  std::vector<std::unique_ptr<Communicator>> comms;
  for (const auto& label : o.backends) {
    collectives::CommunicatorOptions options = o.communicator;
    const auto variant = o.ringNetworkVariants.find(label);
    if (variant != o.ringNetworkVariants.end()) options.ringNetworkChunkBytes = variant->second;
    const std::string backend = variant != o.ringNetworkVariants.end() ? "ring" : label;
    comms.push_back(collectives::makeCommunicator(backend, MPI_COMM_WORLD, options));
  }
  return comms;
}

// The JSON document's description of the run; the results join it at the end.
nlohmann::json describeRun(const collectives::MpiEnvironment& env, const Options& o,
                           const Collective& collective, const Gpu& gpu) {
  nlohmann::json json;
  json["program"] = std::string(collective.name) + "_perf";
  json["ranks"] = env.worldSize();
  json["nodes"] = env.nodeCount();
  json["host"] = env.hostName();
  json["mpi"] = mpiLibrary();
  json["datatype"] = std::string(name(o.type));
  json["op"] = std::string(name(o.op));
  json["warmup_iters"] = o.warmupIters;
  json["iters"] = o.iters;
  json["time"] = std::vector<std::string>{"rank0", "average", "min", "max"}[o.average];
  json["device"] = o.device;
  if (o.device == "cuda") json["gpu"] = {{"name", gpu.name}, {"rank0_device", gpu.index}};
  json["ring"] = {{"small_message_bytes", o.communicator.ringSmallMessageBytes},
                  {"chunk_bytes", o.communicator.ringChunkBytes},
                  {"network_chunk_bytes", o.communicator.ringNetworkChunkBytes},
                  {"pipeline_depth", o.communicator.ringPipelineDepth}};
  return json;
}

void printRunHeader(const Options& o, const nlohmann::json& json, const Gpu& gpu) {
  std::cout << fmt::format("# ringtrain {}: {} ranks on {} node(s), {}\n",
                           json["program"].get<std::string>(), json["ranks"].get<int>(),
                           json["nodes"].get<int>(), json["mpi"].get<std::string>());
  std::cout << fmt::format(
      "#  datatype {}, op {}, warm-up {}, iterations {}, time: {} over ranks\n", name(o.type),
      name(o.op), o.warmupIters, o.iters, json["time"].get<std::string>());
  std::cout << fmt::format(
      "#  ring: recursive doubling up to {} B, chunks of {} B ({} B to and from other nodes), "
      "{} in flight\n",
      o.communicator.ringSmallMessageBytes, o.communicator.ringChunkBytes,
      o.communicator.ringNetworkChunkBytes, o.communicator.ringPipelineDepth);
  if (o.device == "cuda") {
    std::cout << fmt::format(
        "#  device buffers: cudaMalloc on GPU local_rank % devices (rank 0: GPU {}, {}); "
        "d2d copy = cudaMemcpy device to device on rank 0, bytes read + written\n",
        gpu.index, gpu.name);
  }
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

void printColumnHeaders(bool onDevice) {
  // On device buffers one more column: the GPU's copy bandwidth at the row's size.
  const auto line = [onDevice](const char* copyColumn, const auto&... columns) {
    return fmt::format(
               "# {:>12} {:>12} {:>9} {:>6} {:>12}  {:>9} {:>7} {:>7} {:>6}  {:>9} {:>7} {:>7} "
               "{:>6}",
               columns...) +
           (onDevice ? fmt::format(" {:>9}", copyColumn) : std::string()) + "\n";
  };
  std::cout << "#\n"
            << line("d2d copy", "", "", "", "", "", "out-of-place", "", "", "", "in-place", "", "",
                    "")
            << line("bw", "size", "count", "type", "redop", "backend", "time", "algbw", "busbw",
                    "#wrong", "time", "algbw", "busbw", "#wrong")
            << line("(GB/s)", "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "",
                    "(us)", "(GB/s)", "(GB/s)", "");
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

// One size on one backend, out of place and in place.
struct Row {
  std::string backend;
  std::size_t bytes = 0;
  std::size_t count = 0;
  Measurement outOfPlace;
  Measurement inPlace;
  std::optional<double> copyGbps;  // on device buffers
};

void printRow(const Row& row, const Options& o) {
  const Measurement& out = row.outOfPlace;
  const Measurement& in = row.inPlace;
  std::cout << fmt::format(
                   "  {:>12} {:>12} {:>9} {:>6} {:>12}  {:>9.2f} {:>7.2f} {:>7.2f} {:>6}  "
                   "{:>9.2f} {:>7.2f} {:>7.2f} {:>6}",
                   row.bytes, row.count, name(o.type), name(o.op), row.backend, out.timeUs,
                   out.algbw, out.busbw, out.wrong, in.timeUs, in.algbw, in.busbw, in.wrong)
            << (row.copyGbps ? fmt::format(" {:>9.2f}", *row.copyGbps) : std::string()) << "\n"
            << std::flush;
}

nlohmann::json toJson(const Measurement& m) {
  return nlohmann::json{
      {"time_us", m.timeUs}, {"algbw_gbps", m.algbw}, {"busbw_gbps", m.busbw}, {"wrong", m.wrong}};
}

nlohmann::json toJson(const Row& row) {
  nlohmann::json json{{"backend", row.backend},
                      {"bytes", row.bytes},
                      {"count", row.count},
                      {"out_of_place", toJson(row.outOfPlace)},
                      {"in_place", toJson(row.inPlace)}};
  if (row.copyGbps) json["d2d_copy_gbps"] = *row.copyGbps;
  return json;
}

// What the sweep over the sizes gathers for the summary.
struct Sweep {
  nlohmann::json rows = nlohmann::json::array();
  std::map<std::string, std::pair<double, int>> busbwSums;  // by backend: sum, measurements
  // Per size: the bytes and each backend's out-of-place busbw, in --backends order.
  std::vector<std::pair<std::size_t, std::vector<double>>> outOfPlaceBusbw;
  std::uint64_t totalWrong = 0;

  void add(const Row& row) {
    totalWrong += row.outOfPlace.wrong + row.inPlace.wrong;
    auto& sum = busbwSums[row.backend];
    sum.first += row.outOfPlace.busbw + row.inPlace.busbw;
    sum.second += 2;
    rows.push_back(toJson(row));
  }
};

// Every size from --minbytes to --maxbytes, every backend at each; rank 0 prints the rows.
Sweep sweepSizes(const Bench& bench, const std::vector<std::unique_ptr<Communicator>>& comms,
                 bool root) {
  const Options& o = bench.options;
  const std::size_t e = sizeOf(o.type);
  Sweep sweep;
  for (std::size_t bytes = std::max(o.minBytes, e); bytes <= o.maxBytes; bytes *= o.stepFactor) {
    Row row;
    row.count = bytes / e;
    row.bytes = row.count * e;
    if (o.device == "cuda") row.copyGbps = deviceCopyGbps(bench.buffers, row.bytes, o, root);
    std::vector<double> outOfPlaceBusbw;
    for (std::size_t b = 0; b < comms.size(); ++b) {
      row.backend = o.backends[b];
      row.outOfPlace = measure(bench, *comms[b], row.count, false);
      row.inPlace = measure(bench, *comms[b], row.count, true);
      outOfPlaceBusbw.push_back(row.outOfPlace.busbw);
      if (root) printRow(row, o);
      sweep.add(row);
    }
    sweep.outOfPlaceBusbw.emplace_back(row.bytes, outOfPlaceBusbw);
  }
  return sweep;
}

void printSummary(const Sweep& sweep, const Options& o, nlohmann::json& json) {
  std::cout << fmt::format("# Out of bounds values : {} {}\n", sweep.totalWrong,
                           sweep.totalWrong ? "FAILED" : "OK");
  std::cout << "# Avg bus bandwidth    :";
  for (const auto& b : o.backends) {
    const auto found = sweep.busbwSums.find(b);
    const auto [sum, measurements] =
        found == sweep.busbwSums.end() ? std::pair{0.0, 0} : found->second;
    const double average = sum / std::max(1, measurements);
    std::cout << fmt::format(" {} {:.3f} GB/s ", b, average);
    json["avg_busbw_gbps"][b] = average;
  }
  std::cout << "\n";
}

// Each backend's out-of-place busbw divided by the first backend's, size by size.
void printRelativeBusbw(const Sweep& sweep, const Options& o) {
  std::cout << "#\n# out-of-place busbw relative to " << o.backends[0] << ":\n"
            << fmt::format("# {:>12}", "size");
  for (std::size_t b = 1; b < o.backends.size(); ++b)
    std::cout << fmt::format(" {:>12}", o.backends[b] + "/" + o.backends[0]);
  std::cout << "\n";
  for (const auto& [bytes, busbw] : sweep.outOfPlaceBusbw) {
    std::cout << fmt::format("  {:>12}", bytes);
    for (std::size_t b = 1; b < busbw.size(); ++b)
      std::cout << fmt::format(" {:>12.2f}", busbw[0] > 0 ? busbw[b] / busbw[0] : 0.0);
    std::cout << "\n";
  }
}

// The ring's out-of-place busbw at 16 MiB and more as a share of its memory-traffic floor.
void printRingFloorShares(const Sweep& sweep, double memoryBytesPerSecond) {
  const double floorGbps = ringFloorGbps(memoryBytesPerSecond);
  std::cout << "#\n# ring busbw as a share of the memory-traffic floor ("
            << fmt::format("{:.2f}", floorGbps) << " GB/s), sizes >= 16 MiB:\n";
  for (const auto& row : sweep.rows) {
    if (row["backend"] == "ring" && row["bytes"].get<std::size_t>() >= (std::size_t{16} << 20)) {
      std::cout << fmt::format("  {:>12} {:>6.0f}%\n", row["bytes"].get<std::size_t>(),
                               100.0 * row["out_of_place"]["busbw_gbps"].get<double>() / floorGbps);
    }
  }
}

bool writeJson(const std::string& path, const nlohmann::json& json) {
  std::ofstream file(path);
  file << json.dump(2) << "\n";
  if (file) return true;
  collectives::printLine("error: cannot write " + path);
  return false;
}

int run(int argc, char** argv) {
  collectives::MpiEnvironment env(&argc, &argv);
  Options o;
  if (!readCommandLine(argc, argv, env, o)) return 0;
  const Collective& collective = kAllReduce;
  const bool root = env.worldRank() == 0;
  const bool onDevice = o.device == "cuda";
  const Gpu gpu = onDevice ? chooseGpu(env, o) : Gpu{};
  const auto comms = makeCommunicators(o);

  nlohmann::json json = describeRun(env, o, collective, gpu);
  if (root) printRunHeader(o, json, gpu);
  describeHierarchical(comms, o, json, root);
  const double memoryBytesPerSecond = o.memoryBandwidth ? reportMemoryBandwidth(json, root) : 0;
  if (root) printColumnHeaders(onDevice);

  // One allocation of the largest size, written once, for every size and backend.
  const std::size_t e = sizeOf(o.type);
  Buffers buffers(std::max<std::size_t>(o.maxBytes / e * e, 64), onDevice);
  const Patterns patterns = collective.patterns(o.type, o.op, env.worldRank(), env.worldSize());
  const Sweep sweep = sweepSizes({collective, o, buffers, patterns}, comms, root);
  json["results"] = sweep.rows;

  if (root) {
    printSummary(sweep, o, json);
    if (comms.size() > 1 && env.worldSize() > 1) printRelativeBusbw(sweep, o);
    if (o.memoryBandwidth && env.worldSize() > 1) printRingFloorShares(sweep, memoryBytesPerSecond);
    json["wrong"] = sweep.totalWrong;
    if (!o.jsonPath.empty() && !writeJson(o.jsonPath, json)) return 1;
  }
  return sweep.totalWrong == 0 ? 0 : 1;
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
