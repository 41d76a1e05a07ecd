// allreduce_perf's output: nccl-tests' header lines and tables on rank 0's stdout, ringtrain's
// own comment lines, and the JSON document (--json) with the same numbers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "collectives/communicator.h"
#include "collectives/environment.h"
#include "src/bench/allreduce_perf_harness.h"
#include "src/bench/allreduce_perf_options.h"

namespace ringtrain::allreduce_perf {

// The GPU of --device cuda (index -1: host buffers).
struct Gpu {
  int index = -1;
  std::string name;
};

// The JSON document's description of the run; the results join it at the end.
nlohmann::json describeRun(const collectives::MpiEnvironment& env, const Options& o,
                           const Collective& collective, const Gpu& gpu);

// nccl-tests' first lines: the run's parameters, then one line per rank (gathered on rank 0) with
// its process, host and device.
void printNcclTestsHeader(const collectives::MpiEnvironment& env, const Options& o, const Gpu& gpu);

// ringtrain's own description of the run, after nccl-tests' lines.
void printRunHeader(const Options& o, const nlohmann::json& json);

// The nodes the hierarchical backend found (or was told to simulate): into the JSON, and rank 0
// prints them.
void describeHierarchical(const std::vector<std::unique_ptr<Communicator>>& comms, const Options& o,
                          nlohmann::json& json, bool root);

// The tuned backend's table, printed by rank 0 and kept in the JSON.
void describeTuned(const std::vector<std::unique_ptr<Communicator>>& comms, nlohmann::json& json,
                   bool root);

// Measures the memory bandwidth on every rank at once (--membw): into the JSON, rank 0 prints it
// with the ring's floor; returns one rank's bytes per second.
double reportMemoryBandwidth(nlohmann::json& json, bool root);

// On device buffers, the GPU's copy bandwidth at every size of the sweep (by bytes), printed by
// rank 0 as comment lines before the tables.
std::map<std::size_t, double> measureDeviceCopies(Buffers& buffers, const Options& o, bool root);

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

// Rank 0's "k of n" on stderr, at most every --progress-seconds, so that stdout stays the table.
class Progress {
 public:
  Progress(std::size_t total, double everySeconds, bool root);
  // One more measurement (a row) done: `what` names it.
  void done(const std::string& what);

 private:
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

  void add(const Row& row);
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
Table runTable(const SweepContext& s, Communicator& comm, const std::string& backend, bool root);

// nccl-tests' column headers; `backend` is named on the comment line above them.
void printTableHeader(const std::string& backend);

// nccl-tests' closing lines of a table. "Out of bounds values" is its count: the measurements
// with wrong values, counted once by every rank.
void printTableSummary(const Table& table, int ranks);

// Each backend's out-of-place busbw divided by the first backend's, size by size (one case).
void printRelativeBusbw(const nlohmann::json& rows, const Options& o);

// The ring's out-of-place busbw at 16 MiB and more as a share of its memory-traffic floor.
void printRingFloorShares(const nlohmann::json& rows, double memoryBytesPerSecond);

// Writes the JSON document; false (said on stderr) when the file cannot be written.
bool writeJson(const std::string& path, const nlohmann::json& json);

}  // namespace ringtrain::allreduce_perf
