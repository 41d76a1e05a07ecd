// ringtrain.h's facade under mpirun, every rank checking its own results: the plain collectives
// for each data type, the gradient exchange on several backends, and bad use (a call before
// start(), ranks that disagree, a bad RINGTRAIN_* value) as one Error on every rank.
//
// mpi_gtest_main initialises MPI first, so start() adopts it here: each test starts and shuts
// down the facade, and MPI outlives them all.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "collectives/float16.h"
#include "ringtrain/ringtrain.h"

namespace {

using ringtrain::DataType;
using ringtrain::ReduceOp;

ringtrain::Options optionsFor(ringtrain::Backend backend) {
  ringtrain::Options options;
  options.readEnvironment = false;
  options.backend = backend;
  return options;
}

// Runs `body` between start() and shutdown().
template <class Body>
void withStarted(const ringtrain::Options& options, Body body) {
  ringtrain::start(options);
  body();
  ringtrain::shutdown();
}

// The 16-bit types as raw bits (the facade takes plain buffers), through ringtrain's own
// conversions; small integers are exact in both.
std::uint16_t bitsOf(float value, DataType type) {
  return type == DataType::kBFloat16 ? ringtrain::collectives::toBFloat16(value).bits
                                     : ringtrain::collectives::toFloat16(value).bits;
}

float valueOf(std::uint16_t bits, DataType type) {
  return type == DataType::kBFloat16
             ? ringtrain::collectives::toFloat(ringtrain::collectives::BFloat16{bits})
             : ringtrain::collectives::toFloat(ringtrain::collectives::Float16{bits});
}

// Element i of rank r: (r + 1) * (i % 7 + 1), so the sum over n ranks is
// (i % 7 + 1) * n (n + 1) / 2 and the average (i % 7 + 1) * (n + 1) / 2, exact in 16 bits.
float elementOf(int rank, std::size_t i) {
  return static_cast<float>((rank + 1) * static_cast<int>(i % 7 + 1));
}

float expectedOf(std::size_t i, int n, ReduceOp op) {
  const float sum = static_cast<float>(static_cast<int>(i % 7 + 1) * n * (n + 1) / 2);
  return op == ReduceOp::kSum ? sum : sum / static_cast<float>(n);
}

TEST(Api, CallsBeforeStartThrowOneClearError) {
  ASSERT_FALSE(ringtrain::started());
  float x = 1;
  try {
    ringtrain::allreduce(&x, 1, DataType::kFloat32);
    ADD_FAILURE() << "allreduce before start() did not throw";
  } catch (const ringtrain::Error& e) {
    EXPECT_STREQ(e.what(), "ringtrain::allreduce called before ringtrain::start()");
  }
  EXPECT_THROW(ringtrain::rank(), ringtrain::Error);
  EXPECT_THROW(ringtrain::GradientExchange(), ringtrain::Error);
}

TEST(Api, StartTwiceIsAnError) {
  withStarted(optionsFor(ringtrain::Backend::kRing), [] {
    EXPECT_THROW(ringtrain::start(optionsFor(ringtrain::Backend::kRing)), ringtrain::Error);
    EXPECT_TRUE(ringtrain::started());
  });
  EXPECT_FALSE(ringtrain::started());
}

TEST(Api, RankSizeAndLocalRankDescribeTheJob) {
  withStarted(optionsFor(ringtrain::Backend::kRing), [] {
    int ranks[2] = {ringtrain::rank(), ringtrain::size()};
    std::vector<int> all(2 * static_cast<std::size_t>(ringtrain::size()));
    ringtrain::allgather(ranks, all.data(), 2, DataType::kInt32);
    for (int r = 0; r < ringtrain::size(); ++r) {
      EXPECT_EQ(all[2 * r], r);
      EXPECT_EQ(all[2 * r + 1], ringtrain::size());
    }
    // One machine runs the tests: every rank is local.
    EXPECT_EQ(ringtrain::localSize(), ringtrain::size());
    EXPECT_EQ(ringtrain::localRank(), ringtrain::rank());
  });
}

TEST(Api, AllreduceSumsAndAveragesFloat32InPlace) {
  withStarted(optionsFor(ringtrain::Backend::kRing), [] {
    const int n = ringtrain::size();
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
      for (std::size_t count :
           {std::size_t{0}, std::size_t{1}, std::size_t{5}, std::size_t{10000}}) {
        std::vector<float> data(count);
        for (std::size_t i = 0; i < count; ++i)
          data[i] = elementOf(ringtrain::rank(), i);
        ringtrain::allreduce(data.data(), count, DataType::kFloat32, op);
        for (std::size_t i = 0; i < count; ++i)
          ASSERT_EQ(data[i], expectedOf(i, n, op)) << "element " << i << " of " << count;
      }
    }
  });
}

TEST(Api, AllreduceSumsAndAverages16BitTypes) {
  withStarted(optionsFor(ringtrain::Backend::kRing), [] {
    const int n = ringtrain::size();
    for (DataType type : {DataType::kFloat16, DataType::kBFloat16}) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
        const std::size_t count = 1000;
        std::vector<std::uint16_t> data(count);
        for (std::size_t i = 0; i < count; ++i)
          data[i] = bitsOf(elementOf(ringtrain::rank(), i), type);
        ringtrain::allreduce(data.data(), count, type, op);
        for (std::size_t i = 0; i < count; ++i)
          ASSERT_EQ(valueOf(data[i], type), expectedOf(i, n, op))
              << (type == DataType::kFloat16 ? "float16" : "bfloat16") << " element " << i;
      }
    }
  });
}

TEST(Api, BroadcastCopiesEachRootsBuffer) {
  withStarted(optionsFor(ringtrain::Backend::kRing), [] {
    for (int root = 0; root < ringtrain::size(); ++root) {
      std::vector<double> data(100, ringtrain::rank() == root ? 2.5 + root : -1.0);
      ringtrain::broadcast(data.data(), data.size(), DataType::kFloat64, root);
      for (double v : data)
        ASSERT_EQ(v, 2.5 + root) << "root " << root;
    }
    float x = 0;
    EXPECT_THROW(ringtrain::broadcast(&x, 1, DataType::kFloat32, ringtrain::size()),
                 ringtrain::Error);
  });
}

TEST(Api, AllgatherPlacesEachRanksBlock) {
  withStarted(optionsFor(ringtrain::Backend::kRing), [] {
    const std::size_t perRank = 3;
    std::vector<std::int64_t> mine(perRank, ringtrain::rank() * 10);
    std::vector<std::int64_t> all(perRank * static_cast<std::size_t>(ringtrain::size()));
    ringtrain::allgather(mine.data(), all.data(), perRank, DataType::kInt64);
    for (std::size_t i = 0; i < all.size(); ++i)
      EXPECT_EQ(all[i], static_cast<std::int64_t>(i / perRank) * 10);
  });
}

// Ranks that disagree on a call get one Error on every rank, naming both calls, on every host
// backend (the mpi backend compares first, the others inside their first exchange); the
// communicator is still usable after it.
class ApiMismatchTest : public ::testing::TestWithParam<ringtrain::Backend> {};

// Runs `call` on every rank, expecting an Error that contains every one of `parts`.
template <class Call>
void expectDisagreement(Call call, const std::vector<std::string>& parts) {
  try {
    call();
    ADD_FAILURE() << "the ranks' calls did not disagree";
  } catch (const ringtrain::Error& e) {
    const std::string message = e.what();
    for (const std::string& part : parts)
      EXPECT_NE(message.find(part), std::string::npos) << message;
  }
  float one = 1;
  ringtrain::allreduce(&one, 1, DataType::kFloat32, ReduceOp::kSum);
  EXPECT_EQ(one, static_cast<float>(ringtrain::size()));
}

TEST_P(ApiMismatchTest, AllreduceSizesNameBothRanksOnEveryRank) {
  withStarted(optionsFor(GetParam()), [] {
    if (ringtrain::size() < 2) GTEST_SKIP() << "needs two ranks";
    std::vector<float> data(ringtrain::rank() == 1 ? 12 : 10, 1.0f);
    expectDisagreement([&] { ringtrain::allreduce(data.data(), data.size(), DataType::kFloat32); },
                       {"rank 0 calls all-reduce #", "of 10 float32", "rank 1 calls all-reduce #",
                        "of 12 float32"});
  });
}

TEST_P(ApiMismatchTest, DifferentCollectivesNameBothRanksOnEveryRank) {
  withStarted(optionsFor(GetParam()), [] {
    if (ringtrain::size() < 2) GTEST_SKIP() << "needs two ranks";
    std::vector<float> data(10, 1.0f);
    expectDisagreement(
        [&] {
          if (ringtrain::rank() == 1) {
            ringtrain::broadcast(data.data(), data.size(), DataType::kFloat32, 0);
          } else {
            ringtrain::allreduce(data.data(), data.size(), DataType::kFloat32);
          }
        },
        {"rank 0 calls all-reduce #", "rank 1 calls broadcast #"});
  });
}

std::string backendName(const ::testing::TestParamInfo<ringtrain::Backend>& info) {
  constexpr const char* kNames[] = {"auto", "mpi", "ring", "tuned", "hierarchical", "shm"};
  return kNames[static_cast<int>(info.param)];
}

INSTANTIATE_TEST_SUITE_P(HostBackends, ApiMismatchTest,
                         ::testing::Values(ringtrain::Backend::kMpi, ringtrain::Backend::kRing,
                                           ringtrain::Backend::kTuned,
                                           ringtrain::Backend::kHierarchical,
                                           ringtrain::Backend::kShm),
                         backendName);

TEST(Api, BadEnvironmentVariableIsNamed) {
  ASSERT_EQ(setenv("RINGTRAIN_COMPRESSION", "fp8", 1), 0);
  ringtrain::Options options;  // reads the environment
  try {
    ringtrain::start(options);
    ringtrain::shutdown();
    ADD_FAILURE() << "RINGTRAIN_COMPRESSION=fp8 was accepted";
  } catch (const ringtrain::Error& e) {
    EXPECT_STREQ(e.what(),
                 "RINGTRAIN_COMPRESSION=fp8: --compression 'fp8': expected none, fp16 or bf16");
  }
  unsetenv("RINGTRAIN_COMPRESSION");
  EXPECT_FALSE(ringtrain::started());
}

// `ringtrain train` takes nccl; the facade, whose buffers are on the host, refuses it by name.
TEST(Api, TheGpuBackendIsRefusedByName) {
  ASSERT_EQ(setenv("RINGTRAIN_BACKEND", "nccl", 1), 0);
  try {
    ringtrain::start();
    ringtrain::shutdown();
    ADD_FAILURE() << "RINGTRAIN_BACKEND=nccl was accepted";
  } catch (const ringtrain::Error& e) {
    EXPECT_STREQ(e.what(),
                 "RINGTRAIN_BACKEND=nccl: the library averages host buffers: expected auto, mpi, "
                 "ring, tuned, hierarchical or shm");
  }
  unsetenv("RINGTRAIN_BACKEND");
  EXPECT_FALSE(ringtrain::started());
}

}  // namespace
