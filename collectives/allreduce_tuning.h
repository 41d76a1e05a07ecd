// AllreduceTuning: which all-reduce algorithm the `tuned` backend takes for a message of a given
// size, as Open MPI's tuned decision rules and NCCL's tuner choose: a table of size ranges, made
// for one layout of ranks (how many, how many share a node). `allreduce_perf --autotune` measures
// one and writes it as JSON; without a file the built-in table for the layout is used.
// docs/collectives.md describes the file.
#pragma once

#include <cstddef>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <mpi.h>

#include "base/named_values.h"

namespace ringtrain::collectives {

// kRecursiveDoubling: log2(n) exchanges of the whole buffer, riding on the call's agreement
// check; kRing: the pipelined ring, results streamed past the cache; kRingCached: the ring,
// results written through the cache (RingWrites, ring_allreduce.h); kMpi: MPI_Allreduce;
// kHierarchical: the three-stage all-reduce over the nodes (hierarchical_allreduce.h).
enum class AllreduceAlgorithm { kRecursiveDoubling, kRing, kRingCached, kMpi, kHierarchical };

// The one table of their names (in tables, files and messages).
inline constexpr NamedValue<AllreduceAlgorithm> kAllreduceAlgorithmNames[] = {
    {AllreduceAlgorithm::kRecursiveDoubling, "recursive-doubling"},
    {AllreduceAlgorithm::kRing, "ring"},
    {AllreduceAlgorithm::kRingCached, "ring-cached"},
    {AllreduceAlgorithm::kMpi, "mpi"},
    {AllreduceAlgorithm::kHierarchical, "hierarchical"},
};
std::string_view name(AllreduceAlgorithm algorithm);

// Recursive doubling keeps two buffers of its largest message per rank: a table may give it
// messages of at most this many bytes.
constexpr std::size_t kMaxRecursiveDoublingBytes = std::size_t{4} << 20;

// The ranks a table is made for: how many, and how many share the largest node.
struct RankLayout {
  int worldSize = 1;
  int ranksPerNode = 1;
  bool oneNode() const { return ranksPerNode >= worldSize; }
  bool operator==(const RankLayout&) const = default;
};

// Collective over `comm`: its layout (nodes as NodeTopology finds them; every ranksPerNode
// consecutive ranks when ranksPerNode > 0).
RankLayout rankLayoutOf(MPI_Comm comm, int ranksPerNode);

// A rule's maxBytes that holds every larger size (the last rule's, "null" in the file).
inline constexpr std::size_t kUnboundedBytes = std::numeric_limits<std::size_t>::max();

// Messages of more than the previous rule's maxBytes and at most this one's take `algorithm`.
struct TuningRule {
  std::size_t maxBytes = 0;
  AllreduceAlgorithm algorithm = AllreduceAlgorithm::kRing;
  bool operator==(const TuningRule&) const = default;
};

struct TuningTable {
  RankLayout layout;              // what it was measured for
  std::string cpu;                // the CPU model it was measured on (cpuModel())
  std::string build;              // the ringtrain version that measured it
  std::vector<TuningRule> rules;  // ascending maxBytes; sizes above the last take the last one

  AllreduceAlgorithm choose(std::size_t bytes) const;
  bool uses(AllreduceAlgorithm algorithm) const;
  // The largest message recursive doubling gets (0: none).
  std::size_t recursiveDoublingBytes() const;
  bool operator==(const TuningTable&) const = default;
};

// "recursive-doubling up to 2048 B, mpi up to 32768 B, ring above": for logs.
std::string summary(const TuningTable& table);

// The table used without a tuning file, for `layout`.
TuningTable builtinTuningTable(const RankLayout& layout);
// The `ring` backend's fixed table: recursive doubling up to `smallBytes`
// (CommunicatorOptions::ringSmallMessageBytes), the ring above, whatever the layout; measured on
// nothing, so its layout, CPU and build are left empty.
TuningTable ringBackendTable(std::size_t smallBytes);
// A table that sends every size to `algorithm` (recursive doubling: up to
// kMaxRecursiveDoublingBytes, the ring above; what allreduce_perf --autotune measures).
TuningTable singleAlgorithmTable(const RankLayout& layout, AllreduceAlgorithm algorithm);

// "model name" of /proc/cpuinfo ("unknown" where there is none).
std::string cpuModel();
// This build's ringtrain version.
std::string ringtrainBuild();

// The file's text (JSON); parseTuningTable throws std::invalid_argument saying what is wrong
// with a text.
std::string tuningTableText(const TuningTable& table);
TuningTable parseTuningTable(std::string_view text);
// Why `table` does not fit a job of `layout` on this CPU with this build (another layout, another
// CPU, another ringtrain version), or nullopt when it does.
std::optional<std::string> foreignTableReason(const TuningTable& table, const RankLayout& layout);

// Collective over `comm`: the table every rank uses. Empty `path`: the built-in one. Otherwise
// rank 0 reads the file and broadcasts it; a table made for another layout or CPU is ignored
// with one warning line from rank 0 (the built-in one is used); a file that cannot be read or
// parsed throws std::invalid_argument("tuning file <path>: ...") on every rank.
TuningTable agreedTuningTable(MPI_Comm comm, const RankLayout& layout, const std::string& path);

// Writes `table` to `path`; throws std::runtime_error naming the file when it cannot.
void writeTuningFile(const std::string& path, const TuningTable& table);

}  // namespace ringtrain::collectives
