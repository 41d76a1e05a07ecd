// ringtrain: data-parallel training under mpirun.
//   mpirun -np 2 ringtrain train --data data/mnist
//   ringtrain train --help
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "collectives/communicator.h"
#include "collectives/environment.h"
#include "collectives/mpi_check.h"
#include "collectives/stall_watchdog.h"
#include "data/data_error.h"
#include "data/data_folder.h"
#include "data/hdf5_dataset.h"
#include "data/separate_check.h"
#include "data/synthetic_dataset.h"
#include "models/flush_to_zero.h"
#include "models/matrix_products.h"
#include "src/common/log.h"
#include "src/common/startup_errors.h"
#include "src/storage/checkpoint.h"
#include "src/storage/tensorboard_writer.h"
#include "src/trainer/batch_source.h"
#include "src/trainer/config.h"
#include "src/trainer/consistency_check.h"
#include "src/trainer/device_choice.h"
#include "src/trainer/sigterm_handler.h"
#include "src/trainer/timeline.h"
#include "src/trainer/trainer.h"

namespace ringtrain {
namespace {

constexpr const char* kUsage =
    "usage: ringtrain <command> [options]\n"
    "  train      train a model, data-parallel over the MPI ranks (ringtrain train --help)\n"
    "  check checkpoint|hdf5-dataset FILE\n"
    "             read FILE as the trainer would, without MPI, and say whether it is good\n"
    "  --version  print the version\n"
    "Start it with mpirun: mpirun -np 2 ringtrain train --data data/mnist\n";

struct Sources {
  std::unique_ptr<BatchSource> train;
  std::unique_ptr<BatchSource> test;
};

Sources loadData(const TrainConfig& config) {
  Sources sources;
  if (config.model == "linreg") {
    // y = 2x + 10 plus noise: 8,000 samples to train on, the next 2,000 to test.
    data::LinearRegressionOptions options;
    options.seed = config.seed;
    sources.train = regressionSource(options);
    options.firstIndex = options.size;
    options.size = 2000;
    sources.test = regressionSource(options);
  } else if (config.synthetic) {
    data::SyntheticOptions options;
    options.shape = {config.syntheticShape[0], config.syntheticShape[1], config.syntheticShape[2]};
    options.numClasses = config.syntheticClasses;
    options.size = config.syntheticSize;
    options.seed = config.seed;
    data::DatasetPair pair = data::makeSyntheticPair(
        options,
        std::max<std::int64_t>(1, std::min<std::int64_t>(10000, config.syntheticSize / 6)));
    sources.train = classificationSource(std::move(pair.train));
    sources.test = classificationSource(std::move(pair.test));
  } else {
    data::DatasetPair pair = data::loadDataFolder(config.dataDir);
    sources.train = classificationSource(std::move(pair.train));
    sources.test = classificationSource(std::move(pair.test));
  }
  return sources;
}

int train(int argc, char** argv, collectives::MpiEnvironment& env) {
  TrainConfig config;
  bool help = false;
  std::string helpText;
  std::optional<std::string> error;
  try {
    error = parseTrainConfig(argc, argv, config, help, helpText);
  } catch (const std::exception& e) {
    error = e.what();
  }
  exitEverywhereOnError(error);
  if (help) {
    if (env.worldRank() == 0) std::cout << helpText;
    return 0;
  }
  // A launcher that starts every rank as a job of its own (Open MPI 5 ignores the MPI operator's
  // OMPI_MCA_orte_* settings and runs all ranks on the launcher pod) would train N separate
  // models without a word; --expect-world-size turns that into an error.
  if (config.expectWorldSize > 0 && config.expectWorldSize != env.worldSize()) {
    error = "--expect-world-size " + std::to_string(config.expectWorldSize) + " but MPI started " +
            std::to_string(env.worldSize()) +
            " rank(s) in this job: check the launcher's hostfile and mpirun arguments";
  }
  exitEverywhereOnError(error);
  // --device and --backend auto become what this job can run, the same on every rank.
  const auto choice = chooseDevice(config, deviceFacts(config, env));
  if (const std::string* refusal = std::get_if<std::string>(&choice)) error = *refusal;
  exitEverywhereOnError(error);
  const DeviceChoice& device = std::get<DeviceChoice>(choice);
  const std::string askedDevice = config.device;
  config.device = device.device;
  config.backend = device.backend;
  models::enableFlushToZero();
  models::keepMatrixProductsOnOneThread();

  // Every rank reads its data; a bad file stops all of them with the first rank's message.
  Sources sources;
  try {
    sources = loadData(config);
  } catch (const std::exception& e) {
    error = e.what();
  }
  exitEverywhereOnError(error);

  // The communication thread and the stall watchdog call MPI beside the main thread.
  if (config.overlap || config.stallTimeoutSeconds > 0) {
    env.requireThreadLevel(collectives::ThreadLevel::kMultiple,
                           "--overlap on or --stall-timeout (the gradient engine's threads)");
  }
  if (env.worldRank() == 0) {
    logLine(fmt::format("ringtrain train: {} rank(s) on {} node(s); {}", env.worldSize(),
                        env.nodeCount(), describe(config)));
    logLine(fmt::format("device {} (--device {}{}{})", device.device, askedDevice,
                        device.reason.empty() ? "" : ": ", device.reason));
    if (device.device == "cpu") logLine("matrix products: " + models::matrixProducts().name);
  }
  std::optional<Timeline> timeline;
  try {
    if (!config.timeline.empty()) timeline.emplace(config.timeline, env.world(), env.hostName());
  } catch (const std::exception& e) {
    error = e.what();
  }
  exitEverywhereOnError(error);
  // --logdir: rank 0 alone writes the TensorBoard files.
  std::optional<storage::TrainingLog> trainingLog;
  try {
    if (!config.logdir.empty() && env.worldRank() == 0) trainingLog.emplace(config.logdir);
  } catch (const std::exception& e) {
    error = "--logdir " + config.logdir + ": " + e.what();
  }
  exitEverywhereOnError(error);
  // SIGTERM from here on stops the training at a step all ranks agree on (Trainer::run).
  std::optional<SigtermHandler> sigterm;
  if (config.sigtermGraceSeconds > 0) {
    sigterm.emplace(config.sigtermGraceSeconds, [grace = config.sigtermGraceSeconds] {
      collectives::abortJob(fmt::format(
          "error: SIGTERM: the job has not stopped {} s after the signal (--sigterm-grace); "
          "aborting it, the last complete checkpoint stays usable",
          grace));
    });
  }

  // Declared before the trainer so that it outlives it; started only after the start-up check,
  // which may end the job.
  std::optional<collectives::StallWatchdog> watchdog;
  TrainerEnvironment environment;
  environment.timeline = timeline ? &*timeline : nullptr;
  environment.trainingLog = trainingLog ? &*trainingLog : nullptr;
  environment.stopRequested = sigterm ? &SigtermHandler::received() : nullptr;
  environment.checkConsistency = [&env](const ConsistencyItems& items) {
    exitEverywhereOnError(findDisagreement(env.world(), items));
  };
  Trainer trainer(config, *sources.train, *sources.test, environment);
  // --resume, before the watchdog starts: a refusal ends the job here, on every rank.
  try {
    trainer.resume();
  } catch (const ResumeRefused& refused) {
    error = refused.what();
  }
  exitEverywhereOnError(error);
  if (config.stallTimeoutSeconds > 0) {
    watchdog.emplace(env.world(), config.stallTimeoutSeconds);
    trainer.watchWith(*watchdog);
  }

  TrainingSummary summary;
  try {
    summary = trainer.run();
  } catch (const TrainingStopped& stopped) {
    // Every rank stopped at the same step for the same reason; one says so.
    if (env.worldRank() == 0) collectives::printLine(std::string("error: ") + stopped.what());
    return 3;
  }
  if (timeline) timeline->finish();
  if (env.worldRank() == 0) {
    std::string result =
        summary.lastEvaluation.samples == 0 ? std::string("not evaluated yet")
        : sources.train->classes() > 0
            ? fmt::format("final accuracy {:.4f}", summary.lastEvaluation.accuracy())
            : fmt::format("final test loss {:.6f}", summary.lastEvaluation.meanLoss());
    if (config.model == "linreg") {
      const auto parameters = trainer.model().parameters();
      logLine(fmt::format("learned y = {:.4f} x + {:.4f} (the data: y = 2 x + 10 + noise)",
                          parameters[0], parameters[1]));
    }
    logLine(fmt::format(
        "done: {} steps{} in {:.2f} s of training ({:.2f} s wall), {:.0f} samples/s "
        "({:.0f} per rank), {}; replicas {}",
        summary.steps,
        summary.firstStep > 0
            ? fmt::format(" (steps {} to {}, resumed)", summary.firstStep + 1, summary.lastStep)
            : "",
        summary.trainingSeconds, summary.wallSeconds, summary.samplesPerSecond,
        summary.samplesPerSecondPerRank, result,
        summary.replicasIdentical ? "identical" : "DIFFER"));
    // Two runs that end with the same fingerprint hold the same parameters, bit for bit.
    logLine(fmt::format("parameters after step {}: fingerprint {:016x}", summary.lastStep,
                        summary.parameterFingerprint));
    const double total = std::max(1e-9, summary.trainingSeconds);
    const double steps = static_cast<double>(std::max<std::int64_t>(1, summary.steps));
    logLine(
        fmt::format("time per step: data {:.0f}%, forward+backward {:.0f}%, waiting for "
                    "averaged gradients {:.0f}%, optimiser {:.0f}% ({:.3f} ms per step)",
                    100 * summary.dataSeconds / total, 100 * summary.computeSeconds / total,
                    100 * summary.waitSeconds / total, 100 * summary.optimizerSeconds / total,
                    1000 * total / steps));
    if (summary.reduceSeconds > 0) {
      logLine(
          fmt::format("gradient all-reduces took {:.3f} ms per step, {:.0f}% of it not hidden "
                      "behind computation",
                      1000 * summary.reduceSeconds / steps,
                      100 * std::min(1.0, summary.waitSeconds / summary.reduceSeconds)));
    }
    if (!summary.roundTripsNs.empty()) {
      std::vector<double> trips = summary.roundTripsNs;
      std::sort(trips.begin(), trips.end());
      logLine(fmt::format(
          "cores: a cache line's round trip between rank 0's core and the others' {:.0f} ns in "
          "the median of {} probes ({:.0f} to {:.0f}; under about {:.0f} ns the cores share a "
          "cache)",
          trips[trips.size() / 2], trips.size(), trips.front(), trips.back(),
          Trainer::kShareBelowRoundTripNs));
    }
    if (summary.adaptiveSharing) {
      logLine(fmt::format(
          "--shm-parameters auto: one copy of the parameters for the node in {} of {} steps, {} "
          "switch(es); probing and moving took {:.1f} us per step",
          summary.sharedParameterSteps, summary.steps, summary.sharingSwitches,
          1e6 * summary.sharingSeconds / steps));
    }
    if (summary.stopCheckSeconds > 0) {
      logLine(
          fmt::format("the per-step SIGTERM check took {:.1f} us per step (--sigterm-grace 0 "
                      "turns it off)",
                      1e6 * summary.stopCheckSeconds / steps));
    }
    if (summary.skippedSteps > 0) {
      logLine(fmt::format("{} step(s) skipped for non-finite gradients", summary.skippedSteps));
    }
    if (timeline) logLine("timeline written to " + config.timeline);
    if (summary.checkpoints > 0) {
      logLine(fmt::format(
          "{} checkpoint(s) written, {:.1f} ms each on average; the last: {}", summary.checkpoints,
          1e3 * summary.checkpointSeconds / summary.checkpoints, summary.lastCheckpoint));
    }
    if (trainingLog) logLine("TensorBoard logs in " + config.logdir);
    if (summary.stoppedBySigterm) {
      logLine(fmt::format("stopped by SIGTERM after step {}{}; exit status {}", summary.lastStep,
                          config.checkpointDir.empty() ? " (no --checkpoint-dir: nothing saved)"
                                                       : "; rerun with --resume auto to continue",
                          config.sigtermExitCode));
    }
  }
  if (!summary.replicasIdentical) return 1;
  return summary.stoppedBySigterm ? config.sigtermExitCode : 0;
}

// `ringtrain check KIND FILE`: reads FILE the way training would, in this process, without MPI
// (the trainer runs it as a separate process before reading a file with libhdf5, see
// data/separate_check.h). One line on stdout; exit 0 when the file is good, 2 when it is not,
// and whatever a crash gives.
int check(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: ringtrain check checkpoint|hdf5-dataset FILE\n";
    return 2;
  }
  const std::string kind = argv[2];
  const std::filesystem::path file = argv[3];
  try {
    if (kind == "checkpoint") {
      const storage::CheckpointContent c = storage::readCheckpoint(file);
      std::cout << fmt::format(
          "{}: good checkpoint: step {}, epoch {}, {} parameter tensors, "
          "optimiser {}, written by {} rank(s)\n",
          file.string(), c.step, c.epoch, c.parameters.size(), c.optimizerKind, c.worldSize);
    } else if (kind == "hdf5-dataset") {
      const data::Hdf5Dataset dataset(file);
      // Read the first, a middle and the last sample too: a forged file may crash only there.
      const std::int64_t n = dataset.size();
      const std::vector<std::int64_t> indices = {0, n / 2, n - 1};
      std::vector<float> images(indices.size() *
                                static_cast<std::size_t>(dataset.sampleShape().elements()));
      std::vector<std::int32_t> labels(indices.size());
      dataset.gather(indices, images.data(), labels.data());
      std::cout << "good: " << dataset.describe() << "\n";
    } else {
      std::cerr << "ringtrain check: unknown kind '" << kind << "' (checkpoint, hdf5-dataset)\n";
      return 2;
    }
  } catch (const std::exception& e) {
    std::cout << "error: " << e.what() << "\n";
    return 2;
  }
  return 0;
}

// Where this program is, for the separate checks: /proc/self/exe, else argv[0].
std::filesystem::path thisProgram(const char* argv0) {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::filesystem::path(argv0) : self;
}

}  // namespace
}  // namespace ringtrain

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    std::cout << ringtrain::kUsage;
    return argc < 2 ? 2 : 0;
  }
  if (std::strcmp(argv[1], "--version") == 0) {
    std::cout << "ringtrain " << RINGTRAIN_VERSION << "\n";
    return 0;
  }
  if (std::strcmp(argv[1], "check") == 0) return ringtrain::check(argc, argv);
  if (std::strcmp(argv[1], "train") != 0) {
    std::cerr << "ringtrain: unknown command '" << argv[1] << "'\n" << ringtrain::kUsage;
    return 2;
  }
  ringtrain::data::setFileCheckProgram(ringtrain::thisProgram(argv[0]));
  ringtrain::collectives::MpiEnvironment env(&argc, &argv);
  try {
    // argv[1] is "train": the options start after it.
    return ringtrain::train(argc - 1, argv + 1, env);
  } catch (const std::exception& e) {
    // An error in the middle of training (ranks that disagree, say): print it first, then take
    // the whole job down so no rank is left waiting.
    ringtrain::collectives::abortJob(std::string("error: ") + e.what());
  }
}
