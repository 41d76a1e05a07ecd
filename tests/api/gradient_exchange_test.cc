// ringtrain::GradientExchange under mpirun on each host backend: the caller's gradients come
// back as their average over the ranks, step after step, whatever order they are announced in;
// ranks that register different parameters get one Error naming both, on every rank.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ringtrain/ringtrain.h"

namespace {

using ringtrain::Backend;
using ringtrain::Compression;

struct Setting {
  Backend backend;
  Compression compression;
  const char* name;
};

class GradientExchangeTest : public ::testing::TestWithParam<Setting> {
 protected:
  void SetUp() override {
    ringtrain::Options options;
    options.readEnvironment = false;
    options.backend = GetParam().backend;
    options.compression = GetParam().compression;
    options.fusionThresholdBytes = 4 * 1000;  // several buckets for the sizes below
    ringtrain::start(options);
  }
  void TearDown() override { ringtrain::shutdown(); }
};

// Backward's order: the last layer's bias first. Sizes make several buckets of 4000 bytes.
const std::vector<std::pair<std::string, std::size_t>> kParameters = {
    {"fc2.bias", 3}, {"fc2.weight", 900}, {"fc1.bias", 7}, {"fc1.weight", 1500}, {"embed", 11}};

// Gradient element i of parameter p on rank r in step s: small integers, exact in 16 bits.
float gradientOf(int rank, std::size_t p, std::size_t i, int step) {
  return static_cast<float>((rank + 1) *
                            static_cast<int>((i + p + static_cast<std::size_t>(step)) % 5));
}

float averageOf(int ranks, std::size_t p, std::size_t i, int step) {
  return static_cast<float>(static_cast<int>((i + p + static_cast<std::size_t>(step)) % 5) *
                            (ranks + 1)) /
         2.0f;
}

TEST_P(GradientExchangeTest, GradientsBecomeTheirAverageEveryStep) {
  ringtrain::GradientExchange exchange;
  for (std::size_t p = 0; p < kParameters.size(); ++p)
    EXPECT_EQ(exchange.addParameter(kParameters[p].first, kParameters[p].second),
              static_cast<int>(p));
  std::vector<std::vector<float>> gradients(kParameters.size());
  for (int step = 0; step < 3; ++step) {
    // Step 1 announces them out of order: the exchange still sends the same buckets everywhere.
    std::vector<std::size_t> order = {0, 1, 2, 3, 4};
    if (step == 1) order = {2, 0, 4, 1, 3};
    for (std::size_t p : order) {
      gradients[p].resize(kParameters[p].second);
      for (std::size_t i = 0; i < gradients[p].size(); ++i)
        gradients[p][i] = gradientOf(ringtrain::rank(), p, i, step);
      exchange.gradientReady(static_cast<int>(p), gradients[p].data());
    }
    exchange.wait();
    for (std::size_t p = 0; p < kParameters.size(); ++p) {
      for (std::size_t i = 0; i < gradients[p].size(); ++i) {
        ASSERT_EQ(gradients[p][i], averageOf(ringtrain::size(), p, i, step))
            << kParameters[p].first << "[" << i << "] in step " << step;
      }
    }
  }
  EXPECT_NE(exchange.describeBuckets().find("bucket 1"), std::string::npos)
      << exchange.describeBuckets();
}

// Gradients computed in the engine's own buffer (gradientBuffer) need no copy and come back as
// the average there, step after step; parameterSize gives each one's count.
TEST_P(GradientExchangeTest, GradientsWrittenInTheEnginesBufferBecomeTheirAverage) {
  ringtrain::GradientExchange exchange;
  for (const auto& [name, count] : kParameters)
    exchange.addParameter(name, count);
  std::vector<float*> buffers;
  for (std::size_t p = 0; p < kParameters.size(); ++p) {
    ASSERT_EQ(exchange.parameterSize(static_cast<int>(p)), kParameters[p].second);
    buffers.push_back(exchange.gradientBuffer(static_cast<int>(p)));
  }
  for (std::size_t p = 1; p < buffers.size(); ++p)
    EXPECT_NE(buffers[p], buffers[p - 1]);
  for (int step = 0; step < 3; ++step) {
    for (std::size_t p = 0; p < kParameters.size(); ++p) {
      for (std::size_t i = 0; i < kParameters[p].second; ++i)
        buffers[p][i] = gradientOf(ringtrain::rank(), p, i, step);
      exchange.gradientReady(static_cast<int>(p), buffers[p]);
    }
    exchange.wait();
    for (std::size_t p = 0; p < kParameters.size(); ++p) {
      EXPECT_EQ(exchange.gradientBuffer(static_cast<int>(p)), buffers[p]);
      for (std::size_t i = 0; i < kParameters[p].second; ++i) {
        ASSERT_EQ(buffers[p][i], averageOf(ringtrain::size(), p, i, step))
            << kParameters[p].first << "[" << i << "] in step " << step;
      }
    }
  }
  EXPECT_THROW(exchange.gradientBuffer(static_cast<int>(kParameters.size())), ringtrain::Error);
  EXPECT_THROW(exchange.parameterSize(-1), ringtrain::Error);
}

// ReduceOp::kSum: the sum over the ranks (small integers: exact in any order and in 16 bits).
TEST_P(GradientExchangeTest, ReduceOpSumLeavesTheSum) {
  ringtrain::GradientExchange exchange(GetParam().compression, ringtrain::ReduceOp::kSum);
  std::vector<std::vector<float>> gradients(kParameters.size());
  for (std::size_t p = 0; p < kParameters.size(); ++p) {
    exchange.addParameter(kParameters[p].first, kParameters[p].second);
    gradients[p].resize(kParameters[p].second);
  }
  for (int step = 0; step < 2; ++step) {
    for (std::size_t p = 0; p < kParameters.size(); ++p) {
      for (std::size_t i = 0; i < gradients[p].size(); ++i)
        gradients[p][i] = gradientOf(ringtrain::rank(), p, i, step);
      exchange.gradientReady(static_cast<int>(p), gradients[p].data());
    }
    exchange.wait();
    const int n = ringtrain::size();
    for (std::size_t p = 0; p < kParameters.size(); ++p) {
      for (std::size_t i = 0; i < gradients[p].size(); ++i) {
        ASSERT_EQ(gradients[p][i], averageOf(n, p, i, step) * static_cast<float>(n))
            << kParameters[p].first << "[" << i << "] in step " << step;
      }
    }
  }
}

TEST_P(GradientExchangeTest, OnlyAverageAndSumAreReductions) {
  try {
    ringtrain::GradientExchange exchange(Compression::kNone, ringtrain::ReduceOp::kMax);
    ADD_FAILURE() << "kMax was accepted";
  } catch (const ringtrain::Error& e) {
    EXPECT_STREQ(e.what(), "ringtrain::GradientExchange: the reduction must be kAverage or kSum");
  }
}

TEST_P(GradientExchangeTest, ParameterNotAnnouncedCountsAsZero) {
  ringtrain::GradientExchange exchange;
  exchange.addParameter("used", 10);
  exchange.addParameter("unused on rank 0", 10);
  std::vector<float> used(10, 2.0f), other(10, 6.0f);
  exchange.gradientReady(0, used.data());
  if (ringtrain::rank() != 0) exchange.gradientReady(1, other.data());
  exchange.wait();  // rank 0's `other` is no gradient of this step: left alone
  const int n = ringtrain::size();
  for (float v : used)
    EXPECT_EQ(v, 2.0f);
  for (float v : other) {
    EXPECT_EQ(v, ringtrain::rank() == 0 ? 6.0f
                                        : 6.0f * static_cast<float>(n - 1) / static_cast<float>(n));
  }
}

TEST_P(GradientExchangeTest, DifferentParametersAcrossRanksNameBothRanks) {
  if (ringtrain::size() < 2) GTEST_SKIP() << "needs two ranks";
  ringtrain::GradientExchange exchange;
  exchange.addParameter("weight", ringtrain::rank() == 1 ? 12 : 10);
  std::vector<float> gradient(12, 1.0f);
  try {
    exchange.gradientReady(0, gradient.data());
    ADD_FAILURE() << "ranks with 10 and 12 elements did not disagree";
  } catch (const ringtrain::Error& e) {
    EXPECT_STREQ(
        e.what(),
        "ringtrain::GradientExchange: ranks disagree: rank 1 registers parameter 0 "
        "'weight' of 12 float32 where rank 0 registers parameter 0 'weight' of 10 float32");
  }
}

TEST_P(GradientExchangeTest, AnnouncingTwiceInOneStepIsAnError) {
  ringtrain::GradientExchange exchange;
  exchange.addParameter("w", 4);
  exchange.addParameter("b", 1);
  std::vector<float> w(4, 1.0f), b(1, 1.0f);
  exchange.gradientReady(0, w.data());
  EXPECT_THROW(exchange.gradientReady(0, w.data()), ringtrain::Error);
  exchange.gradientReady(1, b.data());
  exchange.wait();
  EXPECT_EQ(w[0], 1.0f);
}

std::string settingName(const ::testing::TestParamInfo<Setting>& setting) {
  return setting.param.name;
}

INSTANTIATE_TEST_SUITE_P(
    Backends, GradientExchangeTest,
    ::testing::Values(Setting{Backend::kRing, Compression::kNone, "ring"},
                      Setting{Backend::kMpi, Compression::kNone, "mpi"},
                      Setting{Backend::kTuned, Compression::kNone, "tuned"},
                      Setting{Backend::kShm, Compression::kNone, "shm"},
                      Setting{Backend::kRing, Compression::kBFloat16, "ring_bf16"},
                      Setting{Backend::kRing, Compression::kFloat16, "ring_fp16"},
                      // one node: shm for the plain exchange, tuned for the compressed one
                      Setting{Backend::kAuto, Compression::kFloat16, "auto_fp16"}),
    settingName);

}  // namespace
