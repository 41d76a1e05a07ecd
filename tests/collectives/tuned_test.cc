// The tuned backend: each all-reduce takes the algorithm its table gives its size, with results
// right (against the mpi backend's) and identical on every rank on both sides of every bound; a
// call whose sizes straddle a bound on different ranks is caught like the ring's; a tuning file
// is read by rank 0 for every rank, a foreign one ignored and a garbage one refused on every rank.
#include <gtest/gtest.h>
#include <unistd.h>

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
