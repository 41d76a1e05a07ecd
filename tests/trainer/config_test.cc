// `ringtrain train` options: defaults, the three sources and their precedence, and one clear
// line for every bad value.
#include "src/trainer/config.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace ringtrain {
namespace {

struct Parsed {
  TrainConfig config;
  std::optional<std::string> error;
  bool help = false;
};

Parsed parse(std::vector<std::string> words) {
  std::vector<const char*> argv = {"train"};
  for (const auto& w : words)
    argv.push_back(w.c_str());
  Parsed p;
  std::string helpText;
  p.error =
      parseTrainConfig(static_cast<int>(argv.size()), argv.data(), p.config, p.help, helpText);
  return p;
}

class ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("ringtrain_config_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_ / "mnist");
  }
  void TearDown() override {
    ::unsetenv("RINGTRAIN_BATCH_SIZE");
    ::unsetenv("RINGTRAIN_LR");
    ::unsetenv("RINGTRAIN_BUILD_DIR");
    std::filesystem::remove_all(dir_);
  }
  std::string data() const { return (dir_ / "mnist").string(); }
  std::filesystem::path dir_;
};

TEST_F(ConfigTest, DefaultsTrainTheMlpWithSgdWhereverTheMachineAllows) {
  const Parsed p = parse({"--data", data()});
  ASSERT_FALSE(p.error) << *p.error;
  EXPECT_EQ(p.config.model, "mlp");
  EXPECT_EQ(p.config.hidden, (std::vector<int>{512, 512}));
  EXPECT_EQ(p.config.optimizer, "sgd");
  EXPECT_EQ(p.config.device, "auto");
  EXPECT_EQ(p.config.backend, "auto");  // ring on cpu, nccl on cuda: device_choice_test.cc
  EXPECT_FALSE(p.config.tf32);
  EXPECT_EQ(p.config.batchSize, 64);
}

TEST_F(ConfigTest, CommandLineBeatsEnvironmentWhichBeatsTheConfigFile) {
  const std::string file = (dir_ / "train.cfg").string();
  std::ofstream(file) << "batch-size = 8\nlr = 0.5\nepochs = 3\nhidden = 64,32\n";
  ::setenv("RINGTRAIN_BATCH_SIZE", "16", 1);
  ::setenv("RINGTRAIN_LR", "0.25", 1);
  ::setenv("RINGTRAIN_BUILD_DIR", "/somewhere", 1);  // a script's variable, not an option
  const Parsed p = parse({"--data", data(), "--config", file, "--lr", "0.125"});
  ASSERT_FALSE(p.error) << *p.error;
  EXPECT_DOUBLE_EQ(p.config.learningRate, 0.125);  // command line
  EXPECT_EQ(p.config.batchSize, 16);               // environment
  EXPECT_EQ(p.config.epochs, 3);                   // file
  EXPECT_EQ(p.config.hidden, (std::vector<int>{64, 32}));
}

TEST_F(ConfigTest, FlagsWorkBareAndWithValues) {
  const Parsed p =
      parse({"--synthetic", "--nesterov", "--scale-lr=false", "--synthetic-shape", "3x32x32"});
  ASSERT_FALSE(p.error) << *p.error;
  EXPECT_TRUE(p.config.synthetic);
  EXPECT_TRUE(p.config.nesterov);
  EXPECT_FALSE(p.config.scaleLr);
  EXPECT_EQ(p.config.syntheticShape, (std::vector<int>{3, 32, 32}));
}

TEST_F(ConfigTest, HelpIsRecognised) {
  EXPECT_TRUE(parse({"--help"}).help);
}

TEST_F(ConfigTest, EveryBadValueGetsOneLineNamingTheOption) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--batch-size", "0"}, "--batch-size must be at least 1 (got 0)"},
      {{"--lr", "0"}, "--lr must be greater than 0"},
      {{"--lr", "-1"}, "--lr must be greater than 0"},
      {{"--model", "resnet"}, "--model 'resnet': unknown model (linreg, mlp, cnn)"},
      {{"--hidden", "512,abc"}, "--hidden '512,abc': expected positive sizes like 512,512"},
      {{"--hidden", "512,0"}, "--hidden '512,0'"},
      {{"--optimizer", "lbfgs"}, "--optimizer 'lbfgs': unknown"},
      {{"--backend", "tcp"},
       "--backend 'tcp': unknown backend (auto, mpi, ring, hierarchical, shm, nccl)"},
      {{"--device", "tpu"}, "--device 'tpu': expected auto, cpu or cuda"},
      {{"--device", "cpu", "--backend", "nccl"},
       "--backend nccl averages GPU buffers: it needs --device cuda"},
      {{"--device", "cuda", "--backend", "ring"},
       "--backend ring averages host buffers: with --device cuda use --backend nccl"},
      {{"--device", "cuda", "--compression", "fp16"},
       "--compression fp16 is not supported on the GPU yet"},
      {{"--backend", "nccl", "--compression", "bf16"},
       "--compression bf16 is not supported on the GPU yet"},
      {{"--backend", "shm", "--compression", "fp16"},
       "--compression fp16 makes gradient messages smaller, and --backend shm sends none"},
      {{"--device", "cuda", "--backend", "shm"},
       "--backend shm averages host buffers: with --device cuda use --backend nccl"},
      {{"--momentum", "1.5"}, "--momentum must be in [0, 1)"},
      {{"--epochs", "0"}, "--epochs must be at least 1"},
      {{"--lr-schedule", "linear"}, "--lr-schedule 'linear': unknown"},
      {{"--batch-size", "many"}, "batch-size"},
      {{"--no-such-option"}, "no-such-option"},
      {{"--synthetic-shape", "28x28"}, "--synthetic-shape '28x28': expected C,H,W"},
      {{"--prefetch", "yes"}, "--prefetch 'yes': expected auto, on or off"},
  };
  for (const auto& [words, expected] : cases) {
    std::vector<std::string> args = {"--data", data()};
    args.insert(args.end(), words.begin(), words.end());
    const Parsed p = parse(args);
    ASSERT_TRUE(p.error) << "accepted: " << words[0];
    EXPECT_NE(p.error->find(expected), std::string::npos) << *p.error;
    EXPECT_EQ(p.error->find('\n'), std::string::npos) << "more than one line: " << *p.error;
  }
}

// --prefetch auto: a thread for the next batch where the rank's own thread would otherwise wait
// (on the GPU) or read a file (HDF5); not for data in memory on the CPU.
TEST_F(ConfigTest, PrefetchAutoIsOnForTheGpuAndForFilesOnly) {
  TrainConfig c;
  EXPECT_EQ(c.prefetch, "auto");
  c.device = "cpu";
  EXPECT_FALSE(prefetchesInBackground(c, false));
  EXPECT_TRUE(prefetchesInBackground(c, true));
  c.device = "cuda";
  EXPECT_TRUE(prefetchesInBackground(c, false));
  c.prefetch = "off";
  EXPECT_FALSE(prefetchesInBackground(c, true));
  c.device = "cpu";
  c.prefetch = "on";
  EXPECT_TRUE(prefetchesInBackground(c, false));
}

TEST_F(ConfigTest, AMissingDataFolderIsNamedWithTheWayOut) {
  const Parsed p = parse({"--data", (dir_ / "nowhere").string()});
  ASSERT_TRUE(p.error);
  EXPECT_NE(p.error->find("nowhere: no such folder"), std::string::npos) << *p.error;
  EXPECT_NE(p.error->find("--synthetic"), std::string::npos) << *p.error;
}

TEST_F(ConfigTest, AMissingConfigFileIsNamed) {
  const Parsed p = parse({"--config", (dir_ / "absent.cfg").string()});
  ASSERT_TRUE(p.error);
  EXPECT_NE(p.error->find("absent.cfg: cannot open"), std::string::npos) << *p.error;
}

}  // namespace
}  // namespace ringtrain
