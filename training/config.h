// TrainConfig, GenerationOptions: everything `ringtrain train` and `generate` are told, each in
// one typed struct, and the one table of each program's options (training/option_tables.cc;
// options/option_table.h derives the rest from it; `ringtrain bench`'s are in src/bench).
//
// Filled from, in order of precedence, the command line, RINGTRAIN_* environment variables
// (RINGTRAIN_BATCH_SIZE=64 is --batch-size 64) and a --config file (`batch-size = 64` lines);
// nothing else in ringtrain reads the environment for settings.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/exit_status.h"
#include "base/log.h"
#include "base/named_values.h"
#include "engine/exchange_factory.h"
#include "engine/exchange_options.h"
#include "models/conv2d.h"
#include "models/matrix_products.h"
#include "models/model_factory.h"
#include "options/exchange_settings.h"
#include "options/option_table.h"
#include "training/lr_schedule.h"
#include "training/optimizer.h"

namespace ringtrain::training {

// The modes of the options, each with its one table of names; the engine's (--backend,
// --compression) live in engine/.
enum class ModelKind { kLinreg, kMlp, kCnn, kGpt };
inline constexpr NamedValue<ModelKind> kModelNames[] = {{ModelKind::kLinreg, "linreg"},
                                                        {ModelKind::kMlp, "mlp"},
                                                        {ModelKind::kCnn, "cnn"},
                                                        {ModelKind::kGpt, "gpt"}};

// Named GPT sizes, also accepted as --model names: --model gpt-mini is --model gpt with these
// sizes, each of which --layers, --heads, --width, --context and --vocab may still change.
enum class GptPreset { kMini, kGpt2Small };
inline constexpr NamedValue<GptPreset> kGptPresetNames[] = {{GptPreset::kMini, "gpt-mini"},
                                                            {GptPreset::kGpt2Small, "gpt2-124m"}};
models::GptShape presetShape(GptPreset preset);

enum class Device { kAuto, kCpu, kCuda };  // kCuda: one GPU per rank
inline constexpr NamedValue<Device> kDeviceNames[] = {
    {Device::kAuto, "auto"}, {Device::kCpu, "cpu"}, {Device::kCuda, "cuda"}};

// Gather the next batch on a thread of its own while the step trains.
enum class Prefetch { kAuto, kOn, kOff };
inline constexpr NamedValue<Prefetch> kPrefetchNames[] = {
    {Prefetch::kAuto, "auto"}, {Prefetch::kOn, "on"}, {Prefetch::kOff, "off"}};

// What to do on NaN or infinity in the averaged gradients.
enum class CheckFinite { kOff, kStop, kSkip };
inline constexpr NamedValue<CheckFinite> kCheckFiniteNames[] = {
    {CheckFinite::kOff, "off"}, {CheckFinite::kStop, "stop"}, {CheckFinite::kSkip, "skip"}};

// Resumed on another number of ranks: keep the global batch (the batch per rank changes) or the
// batch per rank (the learning rate is scaled with the global batch).
enum class OnResize { kKeepGlobalBatch, kKeepPerRankBatch };
inline constexpr NamedValue<OnResize> kOnResizeNames[] = {
    {OnResize::kKeepGlobalBatch, "keep-global-batch"},
    {OnResize::kKeepPerRankBatch, "keep-per-rank-batch"}};

// Where a test makes one rank fail in the middle of a step (--test-fail-at).
enum class FailurePoint { kNone, kData, kBackward, kAveraging, kOptimizer, kLogging, kCheckpoint };
inline constexpr NamedValue<FailurePoint> kFailurePointNames[] = {
    {FailurePoint::kNone, "none"},
    {FailurePoint::kData, "data"},
    {FailurePoint::kBackward, "backward"},
    {FailurePoint::kAveraging, "averaging"},
    {FailurePoint::kOptimizer, "optimizer"},
    {FailurePoint::kLogging, "logging"},
    {FailurePoint::kCheckpoint, "checkpoint"}};

// Test-only fault injection (hidden from --help), gathered so that production sets none of it.
struct TrainTestHooks {
  int stallRank = -1;  // this rank stops at gradient collective stallCollective (shm: step)
  std::uint64_t stallCollective = 0;
  int stallSeconds = 0;       // > 0: it takes part after this many seconds (0: never)
  std::int64_t nanStep = -1;  // rank 0 feeds a NaN into this step's batch
  int stepSleepMs = 0;        // every rank sleeps this long per step (slow runs to kill)
  // Rank failRank throws an error at failAt in step failStep (counted from 1), as a damaged
  // file or a full disk would.
  FailurePoint failAt = FailurePoint::kNone;
  int failRank = 0;
  std::int64_t failStep = 1;
  bool noAvx512Bf16 = false;  // act as if this CPU lacked AVX512-BF16 (--precision bf16 refused)
};

struct TrainConfig {
  // Model
  ModelKind model = ModelKind::kMlp;
  std::vector<int> hidden = {512, 512};  // mlp hidden sizes
  models::GptShape gpt;                  // gpt sizes (gpt-mini's unless told otherwise)

  // Data
  std::string dataDir = "data/mnist";             // MNIST IDX files (plain or .gz)
  bool synthetic = false;                         // synthetic data instead of dataDir
  std::vector<int> syntheticShape = {1, 28, 28};  // C,H,W
  int syntheticClasses = 10;
  std::int64_t syntheticSize = 60000;
  bool dropLast = false;                // drop each epoch's last, smaller batch
  Prefetch prefetch = Prefetch::kAuto;  // auto: on with --device cuda or HDF5 data

  // Schedule of the run
  int epochs = 15;
  std::int64_t steps = 0;  // stop after this many steps in total (0: run all epochs)
  int batchSize = 64;      // per rank
  // Micro-batches of batchSize whose gradients are summed before one average and one optimiser
  // step: a step trains on accumulateSteps x batchSize samples per rank.
  int accumulateSteps = 1;
  std::uint64_t seed = 42;
  std::int64_t evalEvery = 0;    // also evaluate every N steps (0: only at each epoch's end)
  std::int64_t evalSamples = 0;  // evaluate on the first N test samples (0: all of them)
  std::int64_t logEvery = 100;

  // Optimiser and learning rate
  OptimizerKind optimizer = OptimizerKind::kSgd;
  double learningRate = 0.1;
  double momentum = 0.9;
  bool nesterov = false;
  double weightDecay = 0.0;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double epsilon = 1e-8;
  LrScheduleKind lrSchedule = LrScheduleKind::kCosine;
  std::int64_t warmupSteps = 0;
  std::int64_t lrStepSize = 1000;  // step schedule: multiply by lrGamma every lrStepSize steps
  double lrGamma = 0.1;
  double clipGradNorm = 0;  // > 0: scale the averaged gradients to at most this global L2 norm
  bool scaleLr = false;     // linear scaling rule: learning rate x number of ranks

  // Device (training/device_choice.h settles auto before training)
  Device device = Device::kAuto;
  bool tf32 = false;  // cuda: TF32 tensor-core matrix products
  models::ConvolutionPath gpuConvolutions = models::ConvolutionPath::kFastest;  // cuda
  models::ConvolutionAlgorithms gpuConvAlgorithms = models::ConvolutionAlgorithms::kPlain;  // cuda
  models::Precision precision = models::Precision::kFloat32;  // cpu matrix products

  // Communication
  // The exchange's settings (options/exchange_settings.h); its backend auto (nullopt) is settled
  // by chooseDevice (device_choice.h) before training.
  engine::ExchangeSettings exchange;
  int expectWorldSize = 0;  // > 0: refuse to run unless the job has exactly this many ranks
  CheckFinite checkFinite = CheckFinite::kOff;
  // ZeRO stage: 1 shards the optimiser state over the ranks (ring and tuned backends), 0 keeps
  // all of it on every rank.
  int zero = 0;
  std::string timeline;  // Chrome trace file to write ("" : none)

  // Checkpoints, resume, logs and SIGTERM (see training/training_checkpoint.h)
  std::string checkpointDir;         // rank 0 writes checkpoints here ("" : none)
  std::int64_t checkpointEvery = 0;  // steps between checkpoints (0: at each epoch's end)
  int keep = 3;                      // checkpoints kept in checkpointDir (0: all)
  std::string resume = "none";       // none | auto (the newest good one in checkpointDir) | PATH
  std::string initFrom;              // safetensors weights to start a fresh run from ("" : none)
  OnResize onResize = OnResize::kKeepGlobalBatch;
  std::string logdir;  // TensorBoard event files and metrics.jsonl ("" : none)
  LogLevel logLevel = LogLevel::kInfo;
  std::string logFile;  // each rank's log file, %r the rank, %h the host ("" : the terminal only)
  double sigtermGraceSeconds = 25;     // SIGTERM: stop, final checkpoint, exit within this (0: die)
  int sigtermExitCode = kExitSigterm;  // the status of a job stopped by SIGTERM

  TrainTestHooks test;

  // RINGTRAIN_* variables that name no option, for rank 0 to warn about once.
  std::vector<std::string> parseWarnings;
};

// Everything `ringtrain generate` is told (src/commands/generation.h runs it).
struct GenerationOptions {
  std::filesystem::path checkpoint;
  std::filesystem::path vocabulary = "data/gpt2";  // encoder.json and vocab.bpe
  std::string prompt;                              // empty: start from <|endoftext|>
  int tokens = 64;                                 // new tokens per sample
  double temperature = 0.8;
  int topK = 40;  // 0: the whole vocabulary
  int samples = 1;
  std::uint64_t seed = 1;
};

// The one table of each program's options.
const options::Table<TrainConfig>& trainOptionTable();
const options::Table<GenerationOptions>& generateOptionTable();

// Parses argv (without the "train" word), the environment and --config. Returns the error of the
// first bad value as one line naming the option, or nullopt. `help` is set (and the help text
// written to helpText) when --help was given.
std::optional<std::string> parseTrainConfig(int argc, const char* const* argv, TrainConfig& config,
                                            bool& help, std::string& helpText);

// Checks the values that do not depend on the machine (ranges, names); returns the first problem.
std::optional<std::string> validateTrainConfig(const TrainConfig& config);
// --prefetch settled: on or off as given; auto is on with --device cuda (the host is otherwise
// idle while the GPU computes) or data read from a file per batch (HDF5), off otherwise.
// `config.device` must be settled (not auto).
bool prefetchesInBackground(const TrainConfig& config, bool dataReadsStorage);

// One line per option with its value, for the start of the log.
std::string describe(const TrainConfig& config);

// Parses argv (without the "generate" word) like parseTrainConfig, for one process.
std::optional<std::string> parseGenerateConfig(int argc, const char* const* argv,
                                               GenerationOptions& options, bool& help,
                                               std::string& helpText);

// The options every rank must agree on, as (--name, value) pairs: the table's compared options,
// and for those compared by presence "(given)" or "(not given)". Paths read on each node, a
// rank's own log and what only rank 0 acts on are left out (docs/options.md lists them).
std::vector<std::pair<std::string, std::string>> comparableOptions(const TrainConfig& config);

// The configuration as `name = value` lines, the format of a --config file, as a checkpoint
// stores it: the options the table marks saved (not --resume, --config, --timeline, which say how
// a run was started rather than what it trains).
std::string configLines(const TrainConfig& config);

// The gradient exchange's settings (and test hooks) of a configuration.
engine::ExchangeOptions exchangeOptions(const TrainConfig& config);

}  // namespace ringtrain::training
