// TrainConfig: everything `ringtrain train` is told, in one typed struct.
//
// Filled by Boost.Program_options from, in order of precedence, the command line, RINGTRAIN_*
// environment variables (RINGTRAIN_BATCH_SIZE=64 is --batch-size 64) and a --config file
// (`batch-size = 64` lines); nothing else in ringtrain reads the environment for settings.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ringtrain {

struct TrainConfig {
  // Model
  std::string model = "mlp";             // linreg | mlp | cnn
  std::vector<int> hidden = {512, 512};  // mlp hidden sizes

  // Data
  std::string dataDir = "data/mnist";             // MNIST IDX files (plain or .gz)
  bool synthetic = false;                         // synthetic data instead of dataDir
  std::vector<int> syntheticShape = {1, 28, 28};  // C,H,W
  int syntheticClasses = 10;
  std::int64_t syntheticSize = 60000;
  bool dropLast = false;          // drop each epoch's last, smaller batch
  std::string prefetch = "auto";  // auto | on | off: gather the next batch on a thread beside
                                  // the step (auto: on with --device cuda or HDF5 data)

  // Schedule of the run
  int epochs = 15;
  std::int64_t steps = 0;  // stop after this many steps in total (0: run all epochs)
  int batchSize = 64;      // per rank
  std::uint64_t seed = 42;
  std::int64_t evalEvery = 0;  // also evaluate every N steps (0: only at each epoch's end)
  std::int64_t logEvery = 100;

  // Optimiser and learning rate
  std::string optimizer = "sgd";  // sgd | adam | adamw
  double learningRate = 0.1;
  double momentum = 0.9;
  bool nesterov = false;
  double weightDecay = 0.0;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double epsilon = 1e-8;
  std::string lrSchedule = "cosine";  // constant | step | cosine
  std::int64_t warmupSteps = 0;
  std::int64_t lrStepSize = 1000;  // step schedule: multiply by lrGamma every lrStepSize steps
  double lrGamma = 0.1;
  bool scaleLr = false;  // linear scaling rule: learning rate x number of ranks

  // Device (src/trainer/device_choice.h settles auto before training)
  std::string device = "auto";  // auto | cpu | cuda (one GPU per rank)
  bool tf32 = false;            // cuda: TF32 tensor-core matrix products

  // Communication
  std::string backend = "auto";  // auto (ring on cpu, nccl on cuda) | mpi | ring | hierarchical
                                 // | nccl
  int expectWorldSize = 0;       // > 0: refuse to run unless the job has exactly this many ranks
  bool overlap = true;           // average gradients while backward runs
  std::string shmParameters = "auto";  // shm: per-rank | shared (one copy per node) | auto
  std::size_t fusionThresholdBytes = std::size_t{8} << 20;  // largest gradient bucket
  std::string compression = "none";                         // none | fp16 | bf16
  double stallTimeoutSeconds = 300;  // abort when a collective waits this long (0: never)
  std::string checkFinite = "off";   // off | stop | skip: NaN/Inf in the averaged gradients
  std::string timeline;              // Chrome trace file to write ("" : none)

  // Checkpoints, resume, logs and SIGTERM (see src/trainer/training_checkpoint.h)
  std::string checkpointDir;         // rank 0 writes checkpoints here ("" : none)
  std::int64_t checkpointEvery = 0;  // steps between checkpoints (0: at each epoch's end)
  int keep = 3;                      // checkpoints kept in checkpointDir (0: all)
  std::string resume = "none";       // none | auto (the newest good one in checkpointDir) | PATH
  std::string onResize = "keep-global-batch";  // resumed on another rank count: keep-global-batch
                                               // | keep-per-rank-batch (lr scaled with the batch)
  std::string logdir;               // TensorBoard event files and metrics.jsonl ("" : none)
  double sigtermGraceSeconds = 25;  // SIGTERM: stop, final checkpoint, exit within this (0: die)
  int sigtermExitCode = 143;        // the status of a job stopped by SIGTERM

  // Test-only fault injection (hidden from --help).
  int testStallRank = -1;  // this rank stops at gradient collective testStallCollective (shm: step)
  std::uint64_t testStallCollective = 0;
  std::int64_t testNanStep = -1;  // rank 0 feeds a NaN into this step's batch
  int testStepSleepMs = 0;        // every rank sleeps this long per step (slow runs to kill)
  // --shm-parameters auto switches between shared and per-rank copies every this many steps,
  // whatever the probe measures (0: as the probe says, every 50 steps)
  int testSwitchSharingEvery = 0;

  // Where the options came from, for the log.
  std::string configFile;
};

// Parses argv (without the "train" word), the environment and --config. Returns the error of the
// first bad value as one line naming the option, or nullopt. `help` is set (and the help text
// written to helpText) when --help was given.
std::optional<std::string> parseTrainConfig(int argc, const char* const* argv, TrainConfig& config,
                                            bool& help, std::string& helpText);

// Checks the values that do not depend on the machine (ranges, names); returns the first problem.
std::optional<std::string> validateTrainConfig(const TrainConfig& config);
// --prefetch settled: on or off as given; auto is on with --device cuda (the host is otherwise
// idle while the GPU computes) or data read from a file per batch (HDF5), off otherwise.
bool prefetchesInBackground(const TrainConfig& config, bool dataReadsStorage);

// "--hidden 512,256" and friends: comma-separated positive integers.
std::optional<std::vector<int>> parseIntList(const std::string& text);

// One line per option with its value, for the start of the log.
std::string describe(const TrainConfig& config);

// The options every rank must agree on, as (--name, value) pairs; paths that may differ from
// node to node (--data, --config, --timeline) are left out, and so are the options only rank 0
// acts on (--checkpoint-*, --keep, --resume, --on-resize, --logdir: rank 0 decides and
// broadcasts what the others need).
std::vector<std::pair<std::string, std::string>> comparableOptions(const TrainConfig& config);

// The configuration as `name = value` lines, the format of a --config file, as a checkpoint
// stores it: the comparable options, --data and the checkpoint options (not --resume, --config,
// --timeline, which say how a run was started rather than what it trains).
std::string configLines(const TrainConfig& config);

// "8M" -> 8388608; "64K", "1G", plain bytes.
std::optional<std::size_t> parseByteSize(const std::string& text);

}  // namespace ringtrain
