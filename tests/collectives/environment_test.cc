// MpiEnvironment: ranks, node-local ranks, nodes and thread level as MPI reports them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <vector>

#include <mpi.h>

#include "collectives/mpi_check.h"
#include "tests/support/mpi_test_environment.h"

namespace ringtrain::testing {
namespace {

TEST(MpiEnvironmentTest, WorldRankAndSizeAreMpisOwn) {
  const auto& env = mpiEnvironment();
  int rank = -1, size = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  EXPECT_EQ(env.worldRank(), rank);
  EXPECT_EQ(env.worldSize(), size);
}

TEST(MpiEnvironmentTest, LocalRanksNumberTheRanksOfEachNodeFromZero) {
  const auto& env = mpiEnvironment();
  // Gather (node index, local rank, local size) from everybody and check them as a whole.
  int mine[3] = {env.nodeIndex(), env.localRank(), env.localSize()};
  std::vector<int> all(3 * static_cast<std::size_t>(env.worldSize()));
  MPI_Allgather(mine, 3, MPI_INT, all.data(), 3, MPI_INT, MPI_COMM_WORLD);
  std::vector<std::vector<int>> localRanksByNode(static_cast<std::size_t>(env.nodeCount()));
  for (int r = 0; r < env.worldSize(); ++r) {
    const int node = all[3 * r];
    ASSERT_GE(node, 0);
    ASSERT_LT(node, env.nodeCount());
    localRanksByNode[node].push_back(all[3 * r + 1]);
    EXPECT_EQ(all[3 * r + 2], env.localSize()) << "on a single host all nodes are this one";
  }
  for (const auto& ranks : localRanksByNode) {
    for (std::size_t i = 0; i < ranks.size(); ++i)
      EXPECT_EQ(ranks[i], static_cast<int>(i));
  }
}

// The tests run on one machine, so all ranks share one node.
TEST(MpiEnvironmentTest, OnOneHostEveryRankIsOnTheSameNode) {
  const auto& env = mpiEnvironment();
  EXPECT_EQ(env.nodeCount(), 1);
  EXPECT_EQ(env.nodeIndex(), 0);
  EXPECT_EQ(env.localSize(), env.worldSize());
  EXPECT_EQ(env.localRank(), env.worldRank());
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  EXPECT_EQ(env.hostName(), host);
}

TEST(MpiEnvironmentTest, AsksForThreadMultipleAndRecordsWhatMpiProvides) {
  const auto& env = mpiEnvironment();
  int provided = -1;
  MPI_Query_thread(&provided);
  EXPECT_EQ(env.requestedThreadLevel(), collectives::ThreadLevel::kMultiple);
  EXPECT_EQ(static_cast<int>(env.providedThreadLevel()), provided);
}

TEST(MpiEnvironmentTest, ProcessLabelNamesRankSizeAndHost) {
  const auto& env = mpiEnvironment();
  EXPECT_EQ(processLabel(), "[rank " + std::to_string(env.worldRank()) + "/" +
                                             std::to_string(env.worldSize()) + " " +
                                             env.hostName() + "]");
}

}  // namespace
}  // namespace ringtrain::testing
