// The tuned backend: each all-reduce takes the algorithm its table gives its size, with results
// right (against the mpi backend's) and identical on every rank on both sides of every bound; a
// call whose sizes straddle a bound on different ranks is caught like the ring's; a tuning file
// is read by rank 0 for every rank, a foreign one ignored and a garbage one refused on every rank.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "base/fingerprint.h"
#include "collectives/tuned_communicator.h"
#include "tests/collectives/collective_test_support.h"
#include "tests/support/mpi_test_environment.h"

namespace ringtrain::testing {
namespace {

using collectives::AllreduceAlgorithm;
using collectives::DataType;
using collectives::ReduceOp;
using collectives::TunedCommunicator;
using collectives::TuningTable;


// Every algorithm in one table; every 2 ranks form a node, so that 3 ranks are uneven nodes.
collectives::CommunicatorOptions twoPerNode() {
  collectives::CommunicatorOptions options;
  options.test.ranksPerNode = 2;
  return options;
}

TuningTable everyAlgorithm() {
  const auto layout = collectives::rankLayoutOf(MPI_COMM_WORLD, 2);
  return {layout,
          collectives::cpuModel(),
          collectives::ringtrainBuild(),
          {{1024, AllreduceAlgorithm::kRecursiveDoubling},
           {16384, AllreduceAlgorithm::kMpi},
           {262144, AllreduceAlgorithm::kRing},
           {collectives::kUnboundedBytes, AllreduceAlgorithm::kHierarchical}}};
}

TEST(TunedBackend, EverySizeAroundEveryBoundIsRightAndTheSameOnEveryRank) {
  const auto options = twoPerNode();
  TunedCommunicator comm(MPI_COMM_WORLD, options, everyAlgorithm());
  auto reference = collectives::makeCommunicator(collectives::Backend::kMpi, MPI_COMM_WORLD);
  const int rank = comm.rank();
  const int ranks = comm.size();
  for (const std::size_t bound : {std::size_t{1024}, std::size_t{16384}, std::size_t{262144}}) {
    for (const std::size_t bytes : {bound - 4, bound, bound + 4}) {
      for (const bool inPlace : {false, true}) {
        const std::size_t count = bytes / sizeof(float);
        SCOPED_TRACE(::testing::Message() << bytes << " bytes, in place " << inPlace << ", "
                                          << name(comm.table().choose(bytes)));
        std::vector<float> send(count), recv(count), expected(count);
        fillInput(DataType::kFloat32, bytes, rank, count, send.data());
        reference->allreduce(send.data(), expected.data(), count, DataType::kFloat32,
                             ReduceOp::kSum);
        float* out = inPlace ? send.data() : recv.data();
        comm.allreduce(send.data(), out, count, DataType::kFloat32, ReduceOp::kSum);
        EXPECT_EQ(countDifferences(DataType::kFloat32, ReduceOp::kSum, bytes, ranks, count, out,
                                   expected.data()),
                  0u);
        EXPECT_EQ(ranksDifferingFromRankZero(fingerprint(out, bytes)),
                  std::vector<int>{});
      }
    }
  }
}

// ZeRO-1's split all-reduce: whatever algorithm the size takes, reduceScatter leaves in each
// rank's shard the bits allreduce gives there, the shards of the ranks cut the buffer into
// consecutive pieces, and gatherShards of the shards gives every rank the whole result; also for
// 16-bit data, and for float32 cut as 16-bit data is (the parameters of a compressed bucket).
void expectSplitAllreduceBits(collectives::Communicator& comm, std::size_t bytes, DataType type) {
  const std::size_t count = bytes / collectives::sizeOf(type);
  SCOPED_TRACE(::testing::Message() << bytes << " bytes of " << name(type));
  std::vector<std::byte> send(bytes), expected(bytes), split(bytes);
  fillInput(type, bytes, comm.rank(), count, send.data());
  comm.allreduce(send.data(), expected.data(), count, type, ReduceOp::kAverage);
  comm.reduceScatter(send.data(), split.data(), count, type, ReduceOp::kAverage);
  const collectives::ElementRange shard = comm.shardOf(count, type);
  const std::size_t size = collectives::sizeOf(type);
  EXPECT_EQ(std::memcmp(split.data() + shard.begin * size, expected.data() + shard.begin * size,
                        shard.size() * size),
            0);
  // The ring leaves segment r+1 on rank r: sorted, the ranks' shards tile [0, count).
  std::vector<std::uint64_t> bounds(2 * static_cast<std::size_t>(comm.size()));
  const std::uint64_t mine[2] = {shard.begin, shard.end};
  MPI_Allgather(mine, 2, MPI_UINT64_T, bounds.data(), 2, MPI_UINT64_T, MPI_COMM_WORLD);
  std::vector<std::pair<std::uint64_t, std::uint64_t>> pieces;
  for (std::size_t r = 0; r < bounds.size(); r += 2)
    pieces.emplace_back(bounds[r], bounds[r + 1]);
  std::sort(pieces.begin(), pieces.end());
  std::uint64_t covered = 0;
  for (const auto& [begin, end] : pieces) {
    EXPECT_EQ(begin, covered);
    covered = std::max(covered, end);
  }
  EXPECT_EQ(covered, count);
  // Only the shard holds its values; the gather fills in the rest.
  std::vector<std::byte> gathered(bytes);
  std::memcpy(gathered.data() + shard.begin * size, split.data() + shard.begin * size,
              shard.size() * size);
  comm.gatherShards(gathered.data(), count, type, type);
  EXPECT_EQ(std::memcmp(gathered.data(), expected.data(), bytes), 0);
  if (type != DataType::kFloat16) return;
  // float32 cut as float16 is.
  std::vector<float> parameters(count, 0.0f), whole(count);
  for (std::size_t i = 0; i < count; ++i)
    whole[i] = static_cast<float>(i) * 0.5f;
  for (std::size_t i = shard.begin; i < shard.end; ++i)
    parameters[i] = whole[i];
  comm.gatherShards(parameters.data(), count, DataType::kFloat32, DataType::kFloat16);
  EXPECT_EQ(parameters, whole);
}

TEST(TunedBackend, TheSplitAllreduceGivesTheAllreduceBitsInEveryShard) {
  const auto options = twoPerNode();
  TunedCommunicator tuned(MPI_COMM_WORLD, options, everyAlgorithm());
  // The ring alone, in chunks of 4 KiB: segments of many chunks.
  collectives::CommunicatorOptions small = options;
  small.ringChunkBytes = 4096;
  small.ringNetworkChunkBytes = 4096;
  TunedCommunicator ring(MPI_COMM_WORLD, small, collectives::ringBackendTable(0), "ring");
  for (collectives::Communicator* comm : {static_cast<collectives::Communicator*>(&tuned),
                                          static_cast<collectives::Communicator*>(&ring)}) {
    EXPECT_TRUE(comm->splitsAllreduce());
    for (const DataType type : {DataType::kFloat32, DataType::kFloat16}) {
      for (const std::size_t bytes : {std::size_t{4}, std::size_t{1020}, std::size_t{16388},
                                      std::size_t{262140}, std::size_t{300004}}) {
        expectSplitAllreduceBits(*comm, bytes, type);
      }
    }
  }
}

TEST(TunedBackend, CountsStraddlingABoundAreCaughtOnEveryRank) {
  if (mpiEnvironment().worldSize() < 2) GTEST_SKIP() << "needs at least 2 ranks";
  const auto options = twoPerNode();
  TunedCommunicator comm(MPI_COMM_WORLD, options, everyAlgorithm());
  // Rank 0 would take recursive doubling, the others MPI.
  const std::size_t count = comm.rank() == 0 ? 4 : 2048;
  std::vector<float> data(count, 1.0f);
  std::string message;
  try {
    comm.allreduce(data.data(), data.data(), count, DataType::kFloat32, ReduceOp::kSum);
  } catch (const collectives::CollectiveMismatchError& error) {
    message = error.what();
  }
  EXPECT_TRUE(std::regex_search(message, std::regex("rank 0 calls all-reduce #[0-9]+ of 4 "
                                                    "float32 \\(sum\\), rank 1 calls all-reduce "
                                                    "#[0-9]+ of 2048 float32")))
      << "'" << message << "'";
  std::vector<float> ones(3000, 1.0f);  // the MPI path, still usable
  comm.allreduce(std::span<float>(ones), ReduceOp::kSum);
  EXPECT_EQ(ones.back(), static_cast<float>(comm.size()));
}

// Rank 0's process id, on every rank.
int rankZeroPid() {
  int pid = ::getpid();
  MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return pid;
}

// A file written by rank 0 alone (the only rank that reads it), removed at the end; its path is
// the same on every rank.
class TuningFile {
 public:
  explicit TuningFile(const std::string& text)
      : path_((std::filesystem::temp_directory_path() /
               ("ringtrain_auto_test_" + std::to_string(rankZeroPid()) + ".json"))
                  .string()) {
    if (mpiEnvironment().worldRank() == 0) std::ofstream(path_) << text;
  }
  ~TuningFile() {
    if (mpiEnvironment().worldRank() == 0) std::filesystem::remove(path_);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

collectives::CommunicatorOptions withFile(const std::string& path) {
  collectives::CommunicatorOptions options;
  options.tuningFile = path;
  return options;
}

TEST(TunedBackend, ATuningFileOfThisLayoutIsUsedOnEveryRank) {
  TuningTable table = everyAlgorithm();
  table.layout = collectives::rankLayoutOf(MPI_COMM_WORLD, 0);
  table.rules.pop_back();  // no hierarchical: real nodes here
  const TuningFile file(tuningTableText(table));
  TunedCommunicator comm(MPI_COMM_WORLD, withFile(file.path()));
  EXPECT_EQ(comm.table(), table);
}

TEST(TunedBackend, AForeignTuningFileIsIgnoredForTheBuiltinTable) {
  TuningTable table = everyAlgorithm();
  table.layout = collectives::rankLayoutOf(MPI_COMM_WORLD, 0);
  table.layout.worldSize += 1;
  const TuningFile file(tuningTableText(table));
  ::testing::internal::CaptureStderr();
  TunedCommunicator comm(MPI_COMM_WORLD, withFile(file.path()));
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(comm.table(), builtinTuningTable(collectives::rankLayoutOf(MPI_COMM_WORLD, 0)));
  if (comm.rank() == 0) {
    EXPECT_NE(said.find("tuning file " + file.path() + " ignored (measured for " +
                        std::to_string(table.layout.worldSize) + " ranks"),
              std::string::npos)
        << said;
  }
}

TEST(TunedBackend, AGarbageTuningFileIsRefusedOnEveryRankNamingIt) {
  const TuningFile file("{\"format\": \"ringtrain-allreduce-tuning\", \"version\": 1, ");
  std::string message;
  try {
    TunedCommunicator comm(MPI_COMM_WORLD, withFile(file.path()));
  } catch (const std::invalid_argument& e) {
    message = e.what();
  }
  EXPECT_EQ(message.rfind("tuning file " + file.path() + ": not valid", 0), 0u) << message;
}

}  // namespace
}  // namespace ringtrain::testing
