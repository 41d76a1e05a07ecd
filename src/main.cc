// ringtrain: data-parallel training under mpirun.
//   mpirun -np 2 ringtrain train --data data/mnist
//   ringtrain train --help
#include <fmt/format.h>
#include <unistd.h>  // getpid

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "base/exit_status.h"
#include "base/log.h"
#include "base/named_values.h"
#include "collectives/communicator.h"
#include "collectives/environment.h"
#include "collectives/mpi_check.h"
#include "collectives/stall_watchdog.h"
#include "data/hdf5_dataset.h"
#include "engine/timeline.h"
#include "formats/separate_check.h"
#include "models/flush_to_zero.h"
#include "models/matrix_products.h"
#include "options/consistency_check.h"
#include "options/startup_errors.h"
#include "src/bench/bench_config.h"
#include "src/bench/profile_bench.h"
#include "src/commands/eval_command.h"
#include "src/commands/export_command.h"
#include "src/commands/generation.h"
#include "src/commands/script_variables.h"
#include "src/commands/subcommand.h"
#include "storage/checkpoint.h"
#include "storage/checkpoint_folder_lock.h"
#include "storage/tensorboard_writer.h"
#include "training/batch_source.h"
#include "training/config.h"
#include "training/data_sources.h"
#include "training/device_choice.h"
#include "training/model_memory.h"
#include "training/run_report.h"
#include "training/sigterm_handler.h"
#include "training/trainer.h"

namespace ringtrain::commands {
namespace {

void info(std::string_view line) {
  logLine(LogLevel::kInfo, line);
}

constexpr const char* kUsage =
    "usage: ringtrain <command> [options]\n"
    "  train      train a model, data-parallel over the MPI ranks (ringtrain train --help)\n"
    "  bench      a model's gradient exchange with timed stand-ins for its computation:\n"
    "             mpirun -np 2 ringtrain bench --profile resnet50 (bench --help)\n"
    "  eval       the test-set loss and accuracy of a checkpoint or safetensors file, without\n"
    "             training: mpirun -np 2 ringtrain eval --checkpoint FILE|FOLDER --data DIR\n"
    "             (eval --help)\n"
    "  generate   text from a GPT checkpoint: --checkpoint FILE --prompt TEXT (generate --help)\n"
    "  export --format safetensors CHECKPOINT OUT\n"
    "             the checkpoint's weights as a safetensors file other tools read (export --help)\n"
    "  check checkpoint|hdf5-dataset FILE\n"
    "             read FILE as the trainer would, without MPI, and say whether it is good\n"
    "             (hdf5-dataset: every sample is read, every compressed chunk inflated)\n"
    "  --version  print the version\n"
    "Start it with mpirun: mpirun -np 2 ringtrain train --data data/mnist\n"
    "Exit statuses (0 done, 1 failed, 2 bad input, 3 training stopped, 137 killed, 143 stopped by\n"
    "SIGTERM) and what the launch scripts return: docs/options.md#exit-statuses\n";

// The options, with --device and --backend auto settled to what this job can run, the same on
// every rank; nullopt after --help. A bad option ends the job on every rank.
std::optional<training::TrainConfig> settledConfig(int argc, char** argv,
                                                   collectives::MpiEnvironment& env) {
  std::optional<training::TrainConfig> parsed = options::parseOnEveryRank<training::TrainConfig>(
      [&](training::TrainConfig& config, bool& help, std::string& helpText) {
        return training::parseTrainConfig(argc, argv, config, help, helpText);
      },
      env.worldRank());
  if (!parsed) return std::nullopt;  // --help
  training::TrainConfig& config = *parsed;
  std::optional<std::string> error;
  // Before anything else is logged; a file one rank cannot open ends the job on every rank.
  setLogLevel(config.logLevel);
  if (!config.logFile.empty()) {
    error = openLogFile(config.logFile, env.worldRank(), env.worldSize(), env.hostName());
  }
  options::exitEverywhereOnError(error);
  if (!config.logFile.empty()) {  // every rank's file starts with a line
    info(fmt::format("ringtrain {}, pid {}: --log-level {}, --log-file {}", RINGTRAIN_VERSION,
                     ::getpid(), nameIn(kLogLevelNames, config.logLevel),
                     expandLogPattern(config.logFile, env.worldRank(), env.hostName())));
  }
  options::warnOnRankZero(config.parseWarnings, env.worldRank());
  // Before anything collective that an option shapes (the tuning table, the timeline, the first
  // checkpoint): ranks told different things stop here, naming the rank and the option.
  options::exitEverywhereOnError(
      options::findDisagreement(env.world(), training::comparableOptions(config)));
  logLine(LogLevel::kDebug,
          fmt::format("node {} of {}, local rank {} of {}, pid {}", env.nodeIndex(),
                      env.nodeCount(), env.localRank(), env.localSize(), ::getpid()));
  // A launcher that starts every rank as a job of its own (Open MPI 5 ignores the MPI operator's
  // OMPI_MCA_orte_* settings and runs all ranks on the launcher pod) would train N separate
  // models without a word; --expect-world-size turns that into an error.
  if (config.expectWorldSize > 0 && config.expectWorldSize != env.worldSize()) {
    error = "--expect-world-size " + std::to_string(config.expectWorldSize) + " but MPI started " +
            std::to_string(env.worldSize()) +
            " rank(s) in this job: check the launcher's hostfile and mpirun arguments";
  }
  options::exitEverywhereOnError(error);
  const auto choice = training::chooseDevice(config, training::deviceFacts(config, env));
  if (const std::string* refusal = std::get_if<std::string>(&choice)) error = *refusal;
  options::exitEverywhereOnError(error);
  const training::DeviceChoice& device = std::get<training::DeviceChoice>(choice);
  const training::Device asked = config.device;
  config.device = device.device;
  config.exchange.backend = device.backend;
  options::exitEverywhereOnError(
      options::settleTuningFile(config.exchange.tuningFile, config.exchange.backend, env.world()));
  if (env.worldRank() == 0 && !config.exchange.tuningFile.empty() &&
      config.exchange.backend != engine::ExchangeBackend::kTuned) {
    logLine(LogLevel::kWarn,
            fmt::format("--tuning-file {} is not used: backend {} takes no tuning table "
                        "(only tuned does)",
                        config.exchange.tuningFile, engine::name(*config.exchange.backend)));
  }
  if (env.worldRank() == 0) {
    info(fmt::format("ringtrain train: {} rank(s) on {} node(s); {}", env.worldSize(),
                     env.nodeCount(), training::describe(config)));
    info(fmt::format("device {} (--device {}{}{})", nameIn(training::kDeviceNames, device.device),
                     nameIn(training::kDeviceNames, asked), device.reason.empty() ? "" : ": ",
                     device.reason));
    if (device.device == training::Device::kCpu) {
      info("matrix products: " + models::matrixProducts().name +
           (config.precision == models::Precision::kBfloat16
                ? "; bfloat16 inputs, float32 accumulation (AVX512-BF16 kernel)"
                : ""));
    }
  }
  return config;
}

// What a run writes and listens to beside training: rank 0's lock on --checkpoint-dir, the
// timeline, rank 0's TensorBoard files, the SIGTERM handler. A folder that cannot be written or
// is in use, or a file that cannot be opened, ends the job on every rank.
struct RunServices {
  std::optional<storage::CheckpointFolderLock> checkpointLock;
  std::optional<engine::Timeline> timeline;
  std::optional<storage::TrainingLog> trainingLog;
  std::optional<training::SigtermHandler> sigterm;
};

void startServices(const training::TrainConfig& config, collectives::MpiEnvironment& env,
                   RunServices& services) {
  std::optional<std::string> error;
  // First, so that a second job refused here leaves no file of its own behind.
  try {
    if (!config.checkpointDir.empty() && env.worldRank() == 0) {
      services.checkpointLock.emplace(config.checkpointDir, env.hostName());
    }
  } catch (const std::exception& e) {
    error = e.what();
  }
  options::exitEverywhereOnError(error);
  try {
    if (!config.timeline.empty()) {
      services.timeline.emplace(config.timeline, env.world(), env.hostName());
    }
  } catch (const std::exception& e) {
    error = e.what();
  }
  options::exitEverywhereOnError(error);
  try {
    if (!config.logdir.empty() && env.worldRank() == 0) services.trainingLog.emplace(config.logdir);
  } catch (const std::exception& e) {
    error = "--logdir " + config.logdir + ": " + e.what();
  }
  options::exitEverywhereOnError(error);
  // SIGTERM from here on stops the training at a step all ranks agree on (Trainer::run).
  if (config.sigtermGraceSeconds > 0) {
    services.sigterm.emplace(config.sigtermGraceSeconds, [grace = config.sigtermGraceSeconds] {
      collectives::abortJob(fmt::format(
          "error: SIGTERM: the job has not stopped {} s after the signal (--sigterm-grace); "
          "aborting it, the last complete checkpoint stays usable",
          grace));
    });
  }
}

// Builds the trainer, resumes and trains; prints the report on rank 0. Returns the exit status.
// From here an error on one rank ends the job while the trainer still lives: unwinding it first
// would enter collective clean-up (freeing the shared window, say) that the other ranks, waiting
// for this one elsewhere, never reach.
int trainAndReport(const training::TrainConfig& config, const training::Sources& sources,
                   RunServices& services, collectives::MpiEnvironment& env) {
  const auto abortOn = [](const std::exception& e) {
    collectives::abortJob(std::string("error: ") + e.what());
  };
  // Declared before the trainer so that it outlives it; started only after the start-up check,
  // which may end the job.
  std::optional<collectives::StallWatchdog> watchdog;
  training::TrainerEnvironment environment;
  environment.timeline = services.timeline ? &*services.timeline : nullptr;
  environment.trainingLog = services.trainingLog ? &*services.trainingLog : nullptr;
  environment.stopRequested = services.sigterm ? &training::SigtermHandler::received() : nullptr;
  environment.checkConsistency = [&env](const options::ConsistencyItems& items) {
    options::exitEverywhereOnError(options::findDisagreement(env.world(), items));
  };
  std::optional<training::Trainer> trainer;
  std::optional<std::string> refusal;
  try {
    trainer.emplace(config, *sources.train, *sources.test, environment);
    trainer->resume();  // before the watchdog starts: a refusal ends the job here, on every rank
  } catch (const training::ResumeRefused& refused) {
    refusal = refused.what();
  } catch (const std::exception& e) {
    abortOn(e);
  }
  options::exitEverywhereOnError(refusal);
  if (config.exchange.stallTimeoutSeconds > 0) {
    watchdog.emplace(env.world(), config.exchange.stallTimeoutSeconds);
    trainer->watchWith(*watchdog);
  }
  training::TrainingSummary summary;
  try {
    summary = trainer->run();
  } catch (const training::TrainingStopped& stopped) {
    // Every rank stopped at the same step for the same reason; one says so.
    if (env.worldRank() == 0) logLine(LogLevel::kError, std::string("error: ") + stopped.what());
    return kExitTrainingStopped;
  } catch (const std::exception& e) {
    abortOn(e);
  }
  if (services.timeline) services.timeline->finish();
  if (env.worldRank() == 0) {
    training::RunFacts facts;
    facts.classification = sources.train->classes() > 0;
    facts.tokensPerSample = config.model == training::ModelKind::kGpt ? config.gpt.context : 0;
    facts.parameters = trainer->model().parameters();
    for (const std::string& line : training::runReport(summary, config, facts))
      info(line);
  }
  if (!summary.replicasIdentical) return kExitFailed;
  return summary.stoppedBySigterm ? config.sigtermExitCode : kExitOk;
}

int train(int argc, char** argv, collectives::MpiEnvironment& env) {
  const std::optional<training::TrainConfig> settled = settledConfig(argc, argv, env);
  if (!settled) return kExitOk;  // --help
  const training::TrainConfig& config = *settled;
  models::enableFlushToZero();
  models::keepMatrixProductsOnOneThread();
  // Every rank reads its data; a bad file stops all of them with the first rank's message.
  std::optional<std::string> error;
  training::Sources sources;
  try {
    sources = training::loadData(config);
    error = training::modelMemoryProblem(config, training::modelSpecFor(config, *sources.train),
                                         env.localSize(), physicalMemoryBytes());
  } catch (const std::exception& e) {
    error = e.what();
  }
  options::exitEverywhereOnError(error);
  // The communication thread and the stall watchdog call MPI beside the main thread.
  if (config.exchange.overlap || config.exchange.stallTimeoutSeconds > 0) {
    env.requireThreadLevel(collectives::ThreadLevel::kMultiple,
                           "--overlap on or --stall-timeout (the gradient engine's threads)");
  }
  RunServices services;
  startServices(config, env, services);
  return trainAndReport(config, sources, services, env);
}

// `check`'s kinds of file; hdf5-dataset-quick is what the trainer runs before libhdf5 opens a
// file in the job (formats/separate_check.h).
enum class CheckKind { kCheckpoint, kHdf5Dataset, kHdf5DatasetQuick };
constexpr NamedValue<CheckKind> kCheckKindNames[] = {
    {CheckKind::kCheckpoint, "checkpoint"},
    {CheckKind::kHdf5Dataset, "hdf5-dataset"},
    {CheckKind::kHdf5DatasetQuick, "hdf5-dataset-quick"}};

struct CheckRequest {
  CheckKind kind = CheckKind::kCheckpoint;
  std::string file;
};

// KIND FILE, bare (or as --kind, --file).
const options::Table<CheckRequest>& checkOptionTable() {
  static const options::Table<CheckRequest> table = [] {
    const std::string group = "ringtrain check KIND FILE";
    constexpr auto kPerRank = options::Agreement::kPerRank;  // one process: nothing compared
    options::Table<CheckRequest> rows = {
        options::with(options::choice<CheckRequest>(
                          "kind", [](CheckRequest & r) -> auto& { return r.kind; }, kCheckKindNames,
                          "what FILE is"),
                      group, kPerRank),
        options::with(options::text<CheckRequest>(
                          "file", [](CheckRequest & r) -> auto& { return r.file; }, "the file"),
                      group, kPerRank)};
    for (auto& row : rows) {
      row.required = true;
      row.positional = true;
    }
    return rows;
  }();
  return table;
}

const options::Program kCheckProgram{
    "check",
    "usage: ringtrain check checkpoint|hdf5-dataset FILE\n"
    "  read FILE as the trainer would, without MPI; one line on stdout, exit 0 when it is\n"
    "  good, 2 when it is not (hdf5-dataset: every sample read, every compressed chunk "
    "inflated)"};

// Reads `file` as `kind` says; prints the one line of a good file, throws for a bad one.
void checkFile(CheckKind kind, const std::filesystem::path& file) {
  switch (kind) {
    case CheckKind::kCheckpoint: {
      const storage::CheckpointContent c = storage::readCheckpoint(file);
      std::cout << fmt::format(
          "{}: good checkpoint: step {}, epoch {}, {} parameter tensors, "
          "optimiser {}, written by {} rank(s)\n",
          file.string(), c.step, c.epoch, c.parameters.size(), c.optimizerKind, c.worldSize);
      return;
    }
    case CheckKind::kHdf5Dataset: {
      // Every sample, every chunk inflated: damage anywhere in the file is found here.
      const data::Hdf5Dataset dataset(file);
      data::readEverySample(dataset);
      std::cout << "good: " << dataset.describe() << ", every sample read\n";
      return;
    }
    case CheckKind::kHdf5DatasetQuick: {
      // The layout, and the first, a middle and the last sample, where a forged file may crash.
      const data::Hdf5Dataset dataset(file);
      data::readSamples(dataset, {0, dataset.size() / 2, dataset.size() - 1});
      std::cout << "opens: " << dataset.describe()
                << "; read 3 samples only (check hdf5-dataset reads every one)\n";
      return;
    }
  }
}

// `ringtrain check KIND FILE`: reads FILE the way training would, in this process, without MPI
// (the trainer runs it as a separate process before reading a file with libhdf5, see
// formats/separate_check.h). One line on stdout; exit 0 when the file is good, 2 when it is not
// (or the command line is bad, one line on stderr), and whatever a crash gives. --help prints
// the usage and exits 0.
int check(int argc, char** argv) {
  CheckRequest request;
  bool help = false;
  if (const auto problem =
          parseSubcommandLine(kCheckProgram, checkOptionTable(), argc, argv, request, help)) {
    std::cerr << "ringtrain check: " << *problem << "\n";
    return kExitBadInput;
  }
  if (help) return kExitOk;
  try {
    checkFile(request.kind, request.file);
  } catch (const std::exception& e) {
    std::cout << "error: " << e.what() << "\n";
    return kExitBadInput;
  }
  return kExitOk;
}

// Where this program is, for the separate checks: /proc/self/exe, else argv[0].
std::filesystem::path thisProgram(const char* argv0) {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::filesystem::path(argv0) : self;
}

}  // namespace
}  // namespace ringtrain::commands

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    std::cout << ringtrain::commands::kUsage;
    return argc < 2 ? ringtrain::kExitBadInput : ringtrain::kExitOk;
  }
  if (std::strcmp(argv[1], "--version") == 0) {
    std::cout << "ringtrain " << RINGTRAIN_VERSION << "\n";
    return ringtrain::kExitOk;
  }
  // The programs share the RINGTRAIN_* variables: one's variable is no misspelling in another,
  // nor is a script's.
  ringtrain::options::registerKnownVariables(ringtrain::commands::scriptVariables());
  for (auto&& specs :
       {ringtrain::options::specsOf(ringtrain::training::trainOptionTable()),
        ringtrain::options::specsOf(ringtrain::bench::benchOptionTable()),
        ringtrain::options::specsOf(ringtrain::training::generateOptionTable()),
        ringtrain::commands::evalOptionSpecs(), ringtrain::commands::exportOptionSpecs()})
    ringtrain::options::registerProgramOptions(specs);
  if (std::strcmp(argv[1], "check") == 0) return ringtrain::commands::check(argc, argv);
  if (std::strcmp(argv[1], "generate") == 0)
    return ringtrain::commands::generateCommand(argc, argv);
  if (std::strcmp(argv[1], "export") == 0) {
    return ringtrain::commands::exportCommand(argc, argv, RINGTRAIN_VERSION);
  }
  const bool bench = std::strcmp(argv[1], "bench") == 0;
  const bool eval = std::strcmp(argv[1], "eval") == 0;
  if (!bench && !eval && std::strcmp(argv[1], "train") != 0) {
    std::cerr << "ringtrain: unknown command '" << argv[1] << "'\n" << ringtrain::commands::kUsage;
    return ringtrain::kExitBadInput;
  }
  ringtrain::formats::setFileCheckProgram(ringtrain::commands::thisProgram(argv[0]));
  ringtrain::collectives::MpiEnvironment env(&argc, &argv);
  try {
    if (bench)
      return ringtrain::bench::benchCommand(argc - 1, argv + 1, env,
                                            ringtrain::commands::thisProgram(argv[0]));
    if (eval) return ringtrain::commands::evalCommand(argc - 1, argv + 1, env);
    // argv[1] is "train": the options start after it.
    return ringtrain::commands::train(argc - 1, argv + 1, env);
  } catch (const std::exception& e) {
    // An error in the middle of training (ranks that disagree, say): print it first, then take
    // the whole job down so no rank is left waiting.
    ringtrain::collectives::abortJob(std::string("error: ") + e.what());
  }
}
