// `ringtrain train` options: defaults, the three sources and their precedence, and one clear
// line for every bad value.
#include "training/config.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace ringtrain::training {
namespace {

struct Parsed {
  TrainConfig config;
  std::optional<std::string> error;
  bool help = false;
  std::string helpText;
};

Parsed parse(std::vector<std::string> words) {
  std::vector<const char*> argv = {"train"};
  for (const auto& w : words)
    argv.push_back(w.c_str());
  Parsed p;
  p.error =
      parseTrainConfig(static_cast<int>(argv.size()), argv.data(), p.config, p.help, p.helpText);
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
  EXPECT_EQ(p.config.model, ModelKind::kMlp);
  EXPECT_EQ(p.config.hidden, (std::vector<int>{512, 512}));
  EXPECT_EQ(p.config.optimizer, OptimizerKind::kSgd);
  EXPECT_EQ(p.config.device, Device::kAuto);
  EXPECT_FALSE(p.config.exchange.backend)
      << "auto, settled by chooseDevice (device_choice_test.cc)";
  EXPECT_EQ(p.config.exchange.compression, engine::Compression::kNone);
  EXPECT_EQ(p.config.checkFinite, CheckFinite::kOff);
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

// Every mode is read into its enum from the names of one table, which --help lists too.
TEST_F(ConfigTest, ModesAreReadFromTheTablesThatHelpLists) {
  // clang-format off
  const Parsed p = parse({"--data",         data(),
                          "--model",        "cnn",
                          "--device",       "cpu",
                          "--backend",      "hierarchical",
                          "--compression",  "bf16",
                          "--check-finite", "skip",
                          "--optimizer",    "adamw",
                          "--lr-schedule",  "step",
                          "--on-resize",    "keep-per-rank-batch",
                          "--prefetch",     "off",
                          "--precision",    "bf16",
                          "--gpu-convolutions", "im2col"});
  // clang-format on
  ASSERT_FALSE(p.error) << *p.error;
  EXPECT_EQ(p.config.model, ModelKind::kCnn);
  EXPECT_EQ(p.config.device, Device::kCpu);
  EXPECT_EQ(p.config.exchange.backend, engine::ExchangeBackend::kHierarchical);
  EXPECT_EQ(p.config.exchange.compression, engine::Compression::kBFloat16);
  EXPECT_EQ(p.config.checkFinite, CheckFinite::kSkip);
  EXPECT_EQ(p.config.optimizer, OptimizerKind::kAdamW);
  EXPECT_EQ(p.config.lrSchedule, LrScheduleKind::kStep);
  EXPECT_EQ(p.config.onResize, OnResize::kKeepPerRankBatch);
  EXPECT_EQ(p.config.prefetch, Prefetch::kOff);
  EXPECT_EQ(p.config.precision, models::Precision::kBfloat16);
  EXPECT_EQ(p.config.gpuConvolutions, models::ConvolutionPath::kIm2col);
  // --help wraps its lines: compare with every run of spaces and line breaks as one space.
  std::string help;
  for (const char ch : parse({"--help"}).helpText) {
    const bool space = ch == ' ' || ch == '\n';
    if (!space || (!help.empty() && help.back() != ' ')) help += space ? ' ' : ch;
  }
  for (const char* listed :
       {"auto | mpi | ring | tuned | hierarchical | shm | nccl: how gradients are averaged; auto: "
        "shm "
        "where every rank shares one node",
        "none | fp16 | bf16", "off | stop | skip", "linreg | mlp | cnn", "sgd | adam | adamw",
        "constant | step | cosine", "keep-global-batch | keep-per-rank-batch", "auto | cpu | cuda",
        "auto | on | off", "fp32 | bf16"}) {
    EXPECT_NE(help.find(listed), std::string::npos) << "--help does not say: " << listed;
  }
  EXPECT_EQ(help.find("shm-parameters"), std::string::npos) << "a removed option in --help";
  EXPECT_EQ(help.find("test-"), std::string::npos) << "a test hook in --help";
}

TEST_F(ConfigTest, EveryBadValueGetsOneLineNamingTheOption) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--batch-size", "0"}, "--batch-size must be at least 1 (got 0)"},
      {{"--lr", "0"}, "--lr must be greater than 0"},
      {{"--lr", "-1"}, "--lr must be greater than 0"},
      {{"--model", "resnet"},
       "--model 'resnet': expected linreg, mlp, cnn, gpt, gpt-mini or gpt2-124m"},
      {{"--layers", "2"}, "--layers is a gpt option: use it with --model gpt"},
      {{"--model", "gpt", "--heads", "0"}, "--heads must be at least 1 (got 0)"},
      {{"--clip-grad-norm", "-1"}, "--clip-grad-norm must not be negative (0: off)"},
      {{"--hidden", "512,abc"}, "--hidden '512,abc': expected positive sizes like 512,512"},
      {{"--hidden", "512,0"}, "--hidden '512,0'"},
      {{"--optimizer", "lbfgs"}, "--optimizer 'lbfgs': expected sgd, adam or adamw"},
      {{"--backend", "tcp"},
       "--backend 'tcp': expected auto, mpi, ring, tuned, hierarchical, shm or nccl"},
      {{"--compression", "int8"}, "--compression 'int8': expected none, fp16 or bf16"},
      {{"--precision", "fp8"}, "--precision 'fp8': expected fp32 or bf16"},
      {{"--device", "cuda", "--precision", "bf16"},
       "--precision bf16 is for the CPU's matrix products: use --device cpu or auto with it"},
      {{"--check-finite", "warn"}, "--check-finite 'warn': expected off, stop or skip"},
      {{"--on-resize", "grow"},
       "--on-resize 'grow': expected keep-global-batch or keep-per-rank-batch"},
      {{"--overlap", "maybe"}, "--overlap 'maybe': expected on or off"},
      {{"--shm-parameters", "auto"},
       "--shm-parameters was removed: --backend shm keeps a copy of the parameters on every "
       "rank"},
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
      {{"--lr-schedule", "linear"}, "--lr-schedule 'linear': expected constant, step or cosine"},
      {{"--batch-size", "many"}, "batch-size"},
      {{"--accumulate-steps", "0"}, "--accumulate-steps must be at least 1 (got 0)"},
      {{"--accumulate-steps", "-2"}, "--accumulate-steps must be at least 1 (got -2)"},
      {{"--accumulate-steps", "1.5"}, "accumulate-steps"},
      {{"--no-such-option"}, "no-such-option"},
      {{"--synthetic-shape", "28x28"}, "--synthetic-shape '28x28': expected C,H,W"},
      {{"--prefetch", "yes"}, "--prefetch 'yes': expected auto, on or off"},
      {{"--gpu-convolutions", "fft"},
       "--gpu-convolutions 'fft': expected fastest, im2col, cudnn or cudnn-nchw"},
      {{"--lr", "inf"}, "--lr must be a finite number (got inf)"},
      {{"--lr", "nan"}, "--lr must be a finite number (got nan)"},
      {{"--momentum", "-inf"}, "--momentum must be a finite number (got -inf)"},
      {{"--weight-decay", "inf"}, "--weight-decay must be a finite number (got inf)"},
      {{"--beta1", "inf"}, "--beta1 must be a finite number"},
      {{"--beta2", "-inf"}, "--beta2 must be a finite number"},
      {{"--epsilon", "inf"}, "--epsilon must be a finite number (got inf)"},
      {{"--lr-gamma", "-inf"}, "--lr-gamma must be a finite number"},
      {{"--stall-timeout", "inf"},
       "--stall-timeout must be a finite number (got inf) (0 means never)"},
      {{"--sigterm-grace", "inf"}, "--sigterm-grace must be a finite number (got inf)"},
      {{"--log-level", "verbose"}, "--log-level 'verbose': expected error, warn, info or debug"},
      {{"--log-file", "train-%q.log"},
       "--log-file 'train-%q.log': %q is no placeholder (%r the rank, %h the host, %% a percent "
       "sign)"},
      {{"--log-file", "train-%r.log%"}, "--log-file 'train-%r.log%': % is no placeholder"},
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

// --log-level's four levels, info unless told; --log-file's pattern kept as given (each rank
// expands it when it opens its file).
TEST_F(ConfigTest, LogLevelAndLogFileAreRead) {
  const Parsed defaults = parse({"--data", data()});
  ASSERT_FALSE(defaults.error) << *defaults.error;
  EXPECT_EQ(defaults.config.logLevel, LogLevel::kInfo);
  EXPECT_EQ(defaults.config.logFile, "");
  const std::pair<const char*, LogLevel> levels[] = {{"error", LogLevel::kError},
                                                     {"warn", LogLevel::kWarn},
                                                     {"info", LogLevel::kInfo},
                                                     {"debug", LogLevel::kDebug}};
  for (const auto& [text, level] : levels) {
    const Parsed p = parse({"--data", data(), "--log-level", text});
    ASSERT_FALSE(p.error) << *p.error;
    EXPECT_EQ(p.config.logLevel, level) << text;
  }
  const Parsed file = parse({"--data", data(), "--log-file", "logs/%h-%r-100%%.log"});
  ASSERT_FALSE(file.error) << *file.error;
  EXPECT_EQ(file.config.logFile, "logs/%h-%r-100%%.log");
  EXPECT_EQ(expandLogPattern(file.config.logFile, 12, "node7"), "logs/node7-12-100%.log");
  EXPECT_NE(parse({"--help"}).helpText.find("error | warn | info | debug"), std::string::npos);
}

// --prefetch auto: a thread for the next batch where the rank's own thread would otherwise wait
// (on the GPU) or read a file (HDF5); not for data in memory on the CPU.
TEST_F(ConfigTest, PrefetchAutoIsOnForTheGpuAndForFilesOnly) {
  TrainConfig c;
  EXPECT_EQ(c.prefetch, Prefetch::kAuto);
  c.device = Device::kCpu;
  EXPECT_FALSE(prefetchesInBackground(c, false));
  EXPECT_TRUE(prefetchesInBackground(c, true));
  c.device = Device::kCuda;
  EXPECT_TRUE(prefetchesInBackground(c, false));
  c.prefetch = Prefetch::kOff;
  EXPECT_FALSE(prefetchesInBackground(c, true));
  c.device = Device::kCpu;
  c.prefetch = Prefetch::kOn;
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

TEST_F(ConfigTest, ABadValueInTheConfigFileNamesTheFileAndTheLine) {
  const std::string file = (dir_ / "run.cfg").string();
  std::ofstream(file) << "# a comment\nepochs = 3\nbatch-size = many\n";
  const Parsed p = parse({"--data", data(), "--config", file});
  ASSERT_TRUE(p.error);
  EXPECT_NE(p.error->find("--config " + file + " line 3: batch-size = many: "), std::string::npos)
      << *p.error;
  EXPECT_NE(p.error->find("'many'"), std::string::npos) << *p.error;
  EXPECT_EQ(p.error->find('\n'), std::string::npos) << *p.error;
}

TEST_F(ConfigTest, AnUnknownOptionOrARepeatInTheConfigFileNamesTheLine) {
  const std::string file = (dir_ / "run.cfg").string();
  std::ofstream(file) << "epochs = 3\nno-such-option = 1\n";
  Parsed p = parse({"--data", data(), "--config", file});
  ASSERT_TRUE(p.error);
  EXPECT_NE(p.error->find("--config " + file + " line 2: no-such-option = 1: "), std::string::npos)
      << *p.error;
  std::ofstream(file) << "epochs = 3\n\nepochs = 4\n";
  p = parse({"--data", data(), "--config", file});
  ASSERT_TRUE(p.error);
  EXPECT_NE(p.error->find("line 3: epochs = 4: epochs was given on line 1 already"),
            std::string::npos)
      << *p.error;
}

TEST_F(ConfigTest, ABadValueInTheEnvironmentNamesTheVariable) {
  ::setenv("RINGTRAIN_BATCH_SIZE", "many", 1);
  const Parsed p = parse({"--data", data()});
  ASSERT_TRUE(p.error);
  EXPECT_EQ(p.error->rfind("RINGTRAIN_BATCH_SIZE=many: ", 0), 0u) << *p.error;
  EXPECT_NE(p.error->find("'many'"), std::string::npos) << *p.error;
}

// --zero: 0 by default, 1 from the command line or RINGTRAIN_ZERO, and then the exchange shards
// the updates; refused where it cannot shard.
TEST_F(ConfigTest, ZeroIsReadLikeEveryOptionAndShardsTheExchange) {
  Parsed p = parse({"--data", data()});
  ASSERT_FALSE(p.error) << *p.error;
  EXPECT_EQ(p.config.zero, 0);
  EXPECT_FALSE(exchangeOptions(p.config).shardUpdates);
  ::setenv("RINGTRAIN_ZERO", "1", 1);
  p = parse({"--data", data(), "--backend", "ring"});
  ::unsetenv("RINGTRAIN_ZERO");
  ASSERT_FALSE(p.error) << *p.error;
  EXPECT_EQ(p.config.zero, 1);
  EXPECT_TRUE(exchangeOptions(p.config).shardUpdates);
  p = parse({"--data", data(), "--zero", "1", "--backend", "hierarchical"});
  ASSERT_TRUE(p.error);
  EXPECT_EQ(*p.error,
            "--zero 1 splits the ring's all-reduce in two, and --backend hierarchical has no such "
            "split: use --backend ring or tuned");
  p = parse({"--data", data(), "--zero", "1", "--backend", "tuned", "--check-finite", "skip"});
  ASSERT_TRUE(p.error);
  EXPECT_EQ(p.error->rfind("--check-finite skip is not available with --zero 1", 0), 0u);
}

TEST_F(ConfigTest, AValueTheCommandLineOverridesIsNeverRead) {
  ::setenv("RINGTRAIN_LR", "many", 1);
  const std::string file = (dir_ / "run.cfg").string();
  std::ofstream(file) << "batch-size = many\nepochs = 2\n";
  const Parsed p =
      parse({"--data", data(), "--config", file, "--lr", "0.125", "--batch-size", "8"});
  ASSERT_FALSE(p.error) << *p.error;
  EXPECT_DOUBLE_EQ(p.config.learningRate, 0.125);
  EXPECT_EQ(p.config.batchSize, 8);
  EXPECT_EQ(p.config.epochs, 2);
}

}  // namespace
}  // namespace ringtrain::training
