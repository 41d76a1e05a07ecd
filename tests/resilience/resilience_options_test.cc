// The checkpoint, resume, log and SIGTERM options: defaults, environment variables, the
// configuration text a checkpoint keeps, and one line naming the option for each bad value.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <optional>
#include <string>
#include <vector>

#include "training/config.h"

namespace ringtrain::training {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

std::optional<std::string> parse(std::vector<std::string> words, TrainConfig& config) {
  words.insert(words.begin(), {"train", "--synthetic"});
  std::vector<const char*> argv;
  for (const auto& w : words)
    argv.push_back(w.c_str());
  bool help = false;
  std::string helpText;
  return parseTrainConfig(static_cast<int>(argv.size()), argv.data(), config, help, helpText);
}

TEST(ResilienceOptionsTest, DefaultsCheckpointNothingAndHandleSigterm) {
  TrainConfig c;
  ASSERT_FALSE(parse({}, c));
  EXPECT_EQ(c.checkpointDir, "");
  EXPECT_EQ(c.checkpointEvery, 0);
  EXPECT_EQ(c.keep, 3);
  EXPECT_EQ(c.resume, "none");
  EXPECT_EQ(c.onResize, OnResize::kKeepGlobalBatch);
  EXPECT_EQ(c.logdir, "");
  EXPECT_DOUBLE_EQ(c.sigtermGraceSeconds, 25);
  EXPECT_EQ(c.sigtermExitCode, 143);
}

TEST(ResilienceOptionsTest, EveryOptionComesFromTheCommandLineOrTheEnvironment) {
  ::setenv("RINGTRAIN_CHECKPOINT_DIR", "/shared/ckpt", 1);
  ::setenv("RINGTRAIN_ON_RESIZE", "keep-per-rank-batch", 1);
  TrainConfig c;
  const auto error =
      parse({"--checkpoint-every", "50", "--keep", "0", "--resume", "auto", "--logdir",
             "/shared/logs", "--sigterm-grace", "10", "--sigterm-exit-code", "0"},
            c);
  ::unsetenv("RINGTRAIN_CHECKPOINT_DIR");
  ::unsetenv("RINGTRAIN_ON_RESIZE");
  ASSERT_FALSE(error) << *error;
  EXPECT_EQ(c.checkpointDir, "/shared/ckpt");
  EXPECT_EQ(c.checkpointEvery, 50);
  EXPECT_EQ(c.keep, 0);
  EXPECT_EQ(c.resume, "auto");
  EXPECT_EQ(c.onResize, OnResize::kKeepPerRankBatch);
  EXPECT_EQ(c.logdir, "/shared/logs");
  EXPECT_DOUBLE_EQ(c.sigtermGraceSeconds, 10);
  EXPECT_EQ(c.sigtermExitCode, 0);
}

TEST(ResilienceOptionsTest, ResumeDefaultMeansNone) {
  TrainConfig c;
  ASSERT_FALSE(parse({"--resume", "default"}, c));
  EXPECT_EQ(c.resume, "none");
}

TEST(ResilienceOptionsTest, InitFromStartsAFreshRunOrOneThatResumeAutoFindsNothingFor) {
  TrainConfig c;
  ASSERT_FALSE(parse({"--init-from", "w.safetensors"}, c));
  EXPECT_EQ(c.initFrom, "w.safetensors");
  EXPECT_FALSE(
      parse({"--init-from", "w.safetensors", "--resume", "auto", "--checkpoint-dir", "ck"}, c));
  const auto error = parse({"--init-from", "w.safetensors", "--resume", "ck/ckpt-00000001.h5"}, c);
  ASSERT_TRUE(error);
  EXPECT_THAT(*error, StartsWith("--init-from starts a new run and --resume ck/ckpt-00000001.h5 "
                                 "continues a saved one"));
  TrainConfig plain;
  ASSERT_FALSE(parse({"--checkpoint-dir", "ck", "--init-from", "w.safetensors"}, plain));
  EXPECT_THAT(configLines(plain), ::testing::Not(HasSubstr("init-from")))
      << "how a run started is no part of what it trains";
}

TEST(ResilienceOptionsTest, EveryBadValueGetsOneLineNamingTheOption) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--checkpoint-every", "-1"}, "--checkpoint-every must not be negative"},
      {{"--keep", "-2"}, "--keep must not be negative"},
      {{"--resume", "auto"}, "--resume auto needs --checkpoint-dir"},
      {{"--on-resize", "guess"}, "--on-resize 'guess': expected keep-global-batch or"},
      {{"--sigterm-grace", "-5"}, "--sigterm-grace must not be negative"},
      {{"--sigterm-exit-code", "300"}, "--sigterm-exit-code must be in [0, 255] (got 300)"},
      {{"--keep", "many"}, "keep"},
  };
  for (const auto& [words, expected] : cases) {
    TrainConfig c;
    const auto error = parse(words, c);
    ASSERT_TRUE(error) << words[0] << " " << words[1] << " was accepted";
    EXPECT_THAT(*error, HasSubstr(expected));
    EXPECT_EQ(error->find('\n'), std::string::npos) << *error;
  }
}

TEST(ResilienceOptionsTest, TheSavedConfigurationIsAConfigFileOfTheRun) {
  TrainConfig c;
  ASSERT_FALSE(parse({"--checkpoint-dir", "ck", "--batch-size", "32", "--lr", "0.05"}, c));
  const std::string text = configLines(c);
  EXPECT_THAT(text, HasSubstr("batch-size = 32\n"));
  EXPECT_THAT(text, HasSubstr("lr = 0.05\n"));
  EXPECT_THAT(text, HasSubstr("checkpoint-dir = ck\n"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("resume")));
  EXPECT_THAT(text, StartsWith("model = mlp\n"));
}

TEST(ResilienceOptionsTest, AllRanksMustAgreeOnWhetherSigtermIsHandled) {
  TrainConfig on;
  on.checkpointDir = "/one";
  on.logdir = "/one/logs";
  TrainConfig off = on;
  off.sigtermGraceSeconds = 0;
  EXPECT_NE(comparableOptions(on), comparableOptions(off));
  // Rank 0 alone writes checkpoints and logs: their paths may differ (whether checkpoints are
  // written at all may not: the option agreement test).
  TrainConfig elsewhere;
  elsewhere.checkpointDir = "/other";
  elsewhere.logdir = "/other/logs";
  elsewhere.resume = "auto";
  EXPECT_EQ(comparableOptions(on), comparableOptions(elsewhere));
}

}  // namespace
}  // namespace ringtrain::training
