// A model the machine cannot hold is refused before it is allocated, naming its options.
#include "training/model_memory.h"

#include <gtest/gtest.h>

#include <string>

namespace ringtrain::training {
namespace {

constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;

models::ModelSpec mlp(std::vector<models::Index> hidden) {
  return {.name = "mlp", .input = {1, 28, 28}, .classes = 10, .hidden = std::move(hidden)};
}

TEST(ModelMemoryTest, AnMlpLargerThanTheMachineIsRefusedNamingHidden) {
  TrainConfig config;
  config.hidden = {100000, 100000};
  const auto problem = modelMemoryProblem(config, mlp({100000, 100000}), 1, 16 * kGiB);
  ASSERT_TRUE(problem);
  EXPECT_EQ(problem->rfind("--model mlp --hidden 100000,100000: 1.008e+10 parameters need ", 0), 0u)
      << *problem;
  EXPECT_NE(problem->find("but the machine has 16.0 GiB of memory"), std::string::npos) << *problem;
  EXPECT_EQ(problem->find('\n'), std::string::npos);
}

TEST(ModelMemoryTest, TheRanksOfANodeShareItsMemory) {
  TrainConfig config;  // 512,512: 669,706 parameters, 16 bytes each with SGD
  const models::ModelSpec spec = mlp({512, 512});
  EXPECT_FALSE(modelMemoryProblem(config, spec, 1, 11 * 1024 * 1024));
  const auto problem = modelMemoryProblem(config, spec, 2, 11 * 1024 * 1024);
  ASSERT_TRUE(problem);
  EXPECT_NE(problem->find("2 rank(s) on this node"), std::string::npos) << *problem;
}

TEST(ModelMemoryTest, AdamKeepsTwoMomentsSgdOne) {
  TrainConfig config;
  EXPECT_EQ(bytesPerParameter(config), 16u);
  config.optimizer = OptimizerKind::kAdam;
  EXPECT_EQ(bytesPerParameter(config), 20u);
}

TEST(ModelMemoryTest, UnknownMemoryRefusesNothing) {
  TrainConfig config;
  EXPECT_FALSE(modelMemoryProblem(config, mlp({100000, 100000}), 1, 0));
}

TEST(ModelMemoryTest, TheMachinesMemoryIsKnownHere) {
  EXPECT_GT(physicalMemoryBytes(), 0u);
}

}  // namespace
}  // namespace ringtrain::training
