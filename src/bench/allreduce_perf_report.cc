#include "src/bench/allreduce_perf_report.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iostream>

#include <mpi.h>

#include "base/log.h"
#include "collectives/hierarchical_communicator.h"
#include "collectives/mpi_check.h"
#include "collectives/tuned_communicator.h"

namespace ringtrain::allreduce_perf {
namespace {

// Bytes each rank must move through memory for a ring all-reduce of S bytes whose chunks are
// reduced while in cache: read its own input, read the incoming partial sums and the incoming
// reduced segments, write the partial sums and the result: 5(n-1)/n * S. At B bytes/s that takes
// 5(n-1)S/(nB), which is a busbw of 2B/5 (returned in GB/s).
double ringFloorGbps(double memoryBytesPerSecond) {
  return 0.4 * memoryBytesPerSecond / 1e9;
}

// A time as nccl-tests prints it: 7 wide, fewer decimals as it grows.
std::string formatTimeUs(double us) {
  if (us >= 10000.0) return fmt::format("{:>7.0f}", us);
  if (us >= 100.0) return fmt::format("{:>7.1f}", us);
  return fmt::format("{:>7.2f}", us);
}

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

// "m:ss"
std::string minutes(double seconds) {
  const auto s = static_cast<long>(seconds);
  return fmt::format("{}:{:02}", s / 60, s % 60);
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

}  // namespace

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

Progress::Progress(std::size_t total, double everySeconds, bool root)
    : total_(total), every_(everySeconds), root_(root), start_(MPI_Wtime()), last_(start_) {}

void Progress::done(const std::string& what) {
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

void Table::add(const Row& row) {
  for (const Measurement* m : {&row.outOfPlace, &row.inPlace}) {
    busbwSum += m->busbw;
    ++measurements;
    failedMeasurements += m->wrong > 0;
    wrongValues += static_cast<std::uint64_t>(std::max<std::int64_t>(m->wrong, 0));
  }
}

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

void printTableSummary(const Table& table, int ranks) {
  const int errors = table.failedMeasurements * ranks;
  std::cout << fmt::format("# Out of bounds values : {} {}\n", errors, errors ? "FAILED" : "OK")
            << fmt::format("# Avg bus bandwidth    : {:g} \n",
                           table.busbwSum / std::max(1, table.measurements))
            << "#\n";
}

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

}  // namespace ringtrain::allreduce_perf
