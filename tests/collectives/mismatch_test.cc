// The ring and hierarchical backends check that all ranks call the same collective with the same
// arguments: a mismatch throws CollectiveMismatchError on every rank (no hang, no overrun), naming
// two ranks and what each passed, and the communicator keeps working afterwards.
#include <gtest/gtest.h>

#include <regex>
#include <vector>

#include "collectives/communicator.h"
#include "tests/collectives/collective_test_support.h"
#include "tests/support/mpi_test_environment.h"

namespace ringtrain::testing {
namespace {

using collectives::CollectiveMismatchError;
using collectives::DataType;
using collectives::ReduceOp;

class MismatchTest : public ::testing::TestWithParam<BackendConfig> {
 protected:
  void SetUp() override {
    if (mpiEnvironment().worldSize() < 2) GTEST_SKIP() << "needs at least 2 ranks";
    comm_ = makeCommunicator(GetParam());
  }

  // Runs `call`, expects CollectiveMismatchError whose text matches `pattern`, then checks that
  // a well-formed all-reduce still works on every rank.
  template <class Call>
  void expectMismatch(Call call, const std::string& pattern) {
    std::string message;
    try {
      call();
    } catch (const CollectiveMismatchError& error) {
      message = error.what();
    }
    EXPECT_FALSE(message.empty()) << "no CollectiveMismatchError on rank " << comm_->rank();
    EXPECT_TRUE(std::regex_search(message, std::regex(pattern)))
        << "message '" << message << "' does not match '" << pattern << "'";

    std::vector<float> ones(1000, 1.0f);
    comm_->allreduce(std::span<float>(ones), ReduceOp::kSum);
    EXPECT_EQ(ones[999], static_cast<float>(comm_->size())) << "communicator unusable afterwards";
  }

  std::unique_ptr<collectives::Communicator> comm_;
};

// The last rank passes one element more than the others.
TEST_P(MismatchTest, DifferentCountsStopEveryRankNamingBothRanksAndCounts) {
  const int last = comm_->size() - 1;
  for (const std::size_t base : {std::size_t{10}, std::size_t{1} << 20}) {  // small and ring path
    SCOPED_TRACE(::testing::Message() << "base count " << base);
    const std::size_t count = comm_->rank() == last ? base + 1 : base;
    std::vector<float> data(count, 1.0f);
    expectMismatch(
        [&] {
          comm_->allreduce(data.data(), data.data(), count, DataType::kFloat32, ReduceOp::kSum);
        },
        "ranks disagree on the collective: rank 0 calls all-reduce #[0-9]+ of " +
            std::to_string(base) + " float32 \\(sum\\), rank " + std::to_string(last) +
            " calls all-reduce #[0-9]+ of " + std::to_string(base + 1) + " float32");
  }
}

// Each rank in turn is the only one that differs, on a count small enough for the all-reduce to
// ride on the agreement's own exchange: the odd one out may sit out the rounds (the even ranks a
// non-power-of-two size folds), or meet only agreeing partners first; every rank must still throw.
TEST_P(MismatchTest, ALoneDisagreeingRankAnywhereIsCaughtInTheSmallAllreduce) {
  for (int odd = 0; odd < comm_->size(); ++odd) {
    SCOPED_TRACE(::testing::Message() << "rank " << odd << " differs");
    const std::size_t count = comm_->rank() == odd ? 11 : 10;
    const int named = odd == 0 ? 1 : odd;  // rank 0 and the first rank whose call differs
    std::vector<float> data(count, 1.0f);
    expectMismatch(
        [&] {
          comm_->allreduce(data.data(), data.data(), count, DataType::kFloat32, ReduceOp::kSum);
        },
        "rank 0 calls all-reduce #[0-9]+ of " + std::string(odd == 0 ? "11" : "10") +
            " float32 \\(sum\\), rank " + std::to_string(named) + " calls all-reduce #[0-9]+ of " +
            (odd == 0 ? "10" : "11") + " float32 \\(sum\\)$");
  }
}

// One rank's message is below the small-message threshold and the others' above it: they would
// take different algorithms if nothing checked.
TEST_P(MismatchTest, CountsStraddlingTheSmallMessageThresholdAreCaught) {
  const std::size_t count = comm_->rank() == 0 ? 4 : std::size_t{1} << 22;
  std::vector<float> data(count, 1.0f);
  expectMismatch(
      [&] {
        comm_->allreduce(data.data(), data.data(), count, DataType::kFloat32, ReduceOp::kSum);
      },
      "rank 0 calls all-reduce #[0-9]+ of 4 float32 \\(sum\\), rank 1 calls all-reduce "
      "#[0-9]+ of 4194304 float32");
}

TEST_P(MismatchTest, DifferentTypesAreCaught) {
  std::vector<double> data(64, 1.0);
  const DataType type = comm_->rank() == 1 ? DataType::kInt64 : DataType::kFloat64;
  expectMismatch([&] { comm_->allreduce(data.data(), data.data(), 64, type, ReduceOp::kSum); },
                 "rank [0-9]+ calls all-reduce #[0-9]+ of 64 float64 \\(sum\\), rank 1 calls "
                 "all-reduce #[0-9]+ of 64 int64 \\(sum\\)");
}

TEST_P(MismatchTest, DifferentReductionsAreCaught) {
  std::vector<float> data(64, 1.0f);
  const ReduceOp op = comm_->rank() == 1 ? ReduceOp::kMax : ReduceOp::kSum;
  expectMismatch([&] { comm_->allreduce(data.data(), data.data(), 64, DataType::kFloat32, op); },
                 "\\(sum\\), rank 1 calls all-reduce #[0-9]+ of 64 float32 \\(max\\)");
}

TEST_P(MismatchTest, DifferentBroadcastRootsAreCaught) {
  std::vector<float> data(16, 1.0f);
  const int root = comm_->rank() == 1 ? 1 : 0;
  expectMismatch([&] { comm_->broadcast(std::span<float>(data), root); },
                 "from rank 0, rank 1 calls broadcast #[0-9]+ of 16 float32 from rank 1");
}

// Rank 1 is in a broadcast while the others are in an all-reduce.
TEST_P(MismatchTest, DifferentCollectivesAreCaught) {
  std::vector<float> data(16, 1.0f);
  expectMismatch(
      [&] {
        if (comm_->rank() == 1) {
          comm_->broadcast(std::span<float>(data), 0);
        } else {
          comm_->allreduce(std::span<float>(data), ReduceOp::kSum);
        }
      },
      "calls all-reduce #[0-9]+ of 16 float32 \\(sum\\), rank 1 calls broadcast");
}

INSTANTIATE_TEST_SUITE_P(RingBackends, MismatchTest,
                         ::testing::Values(backendConfigs()[1], backendConfigs()[2],
                                           backendConfigs()[3], backendConfigs()[4]),
                         BackendConfigName());

}  // namespace
}  // namespace ringtrain::testing
