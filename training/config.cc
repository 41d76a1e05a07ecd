#include "training/config.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <sstream>

#include "base/file_checks.h"

namespace ringtrain::training {
namespace {

// The combinations of device, backend and compression that cannot work, or nullopt.
std::optional<std::string> deviceAndBackendProblem(const TrainConfig& c) {
  using engine::ExchangeBackend;
  const std::string backend(options::name(c.exchange.backend));
  const bool hostBackend =
      c.exchange.backend && !engine::averagesDeviceBuffers(*c.exchange.backend);
  if (c.exchange.backend == ExchangeBackend::kNccl && c.device == Device::kCpu) {
    return "--backend nccl averages GPU buffers: it needs --device cuda (--device cpu takes mpi, "
           "ring, hierarchical or shm)";
  }
  if (c.device == Device::kCuda && hostBackend) {
    return "--backend " + backend +
           " averages host buffers: with --device cuda use --backend nccl (or auto)";
  }
  if (c.device == Device::kCuda && c.model == ModelKind::kGpt)
    return "--model gpt trains on the CPU only (the GPU path has no transformer layers yet): use "
           "--device cpu or auto";
  if (c.device == Device::kCuda && c.precision != models::Precision::kFloat32)
    return "--precision bf16 is for the CPU's matrix products: use --device cpu or auto with it "
           "(--tf32 is the GPU's reduced precision)";
  if (c.device == Device::kCuda && c.clipGradNorm > 0)
    return "--clip-grad-norm runs on the host only: use --device cpu or auto with it";
  if (auto problem = options::compressionProblem(c.exchange.backend, c.exchange.compression))
    return problem;
  if (c.exchange.compression == engine::Compression::kNone) return std::nullopt;
  const std::string compression(engine::name(c.exchange.compression));
  if (c.device == Device::kCuda || c.exchange.backend == ExchangeBackend::kNccl) {
    return "--compression " + compression +
           " is not supported on the GPU yet (the 16-bit conversion runs on the host): use "
           "--compression none with --device cuda";
  }
  return std::nullopt;
}

// --zero 1 with what cannot shard the optimiser state, or nullopt.
std::optional<std::string> zeroProblem(const TrainConfig& c) {
  using engine::ExchangeBackend;
  if (c.zero == 0) return std::nullopt;
  if (c.exchange.backend && *c.exchange.backend != ExchangeBackend::kRing &&
      *c.exchange.backend != ExchangeBackend::kTuned) {
    return "--zero 1 splits the ring's all-reduce in two, and --backend " +
           std::string(options::name(c.exchange.backend)) +
           " has no such split: use --backend ring or tuned";
  }
  if (c.device == Device::kCuda) return "--zero 1 runs on the host only: use --device cpu or auto";
  if (c.checkFinite != CheckFinite::kOff) {
    return "--check-finite " + std::string(nameIn(kCheckFiniteNames, c.checkFinite)) +
           " is not available with --zero 1 (each rank sees its shard of the averaged gradients "
           "only): use --check-finite off";
  }
  return std::nullopt;
}

// Runs one program's table over argv; --help's text and the warnings go where the caller keeps
// them.
template <class Config>
std::optional<std::string> parseProgram(const options::Program& program,
                                        const options::Table<Config>& table, int argc,
                                        const char* const* argv, Config& config, bool& help,
                                        std::string& helpText, std::vector<std::string>& warnings) {
  options::Outcome outcome;
  auto error = options::parse(program, table, argc, argv, config, outcome);
  help = outcome.help;
  helpText = outcome.helpText;
  warnings = outcome.warnings;
  return error;
}

}  // namespace

std::optional<std::string> validateTrainConfig(const TrainConfig& c) {
  if (auto problem = deviceAndBackendProblem(c)) return problem;
  if (auto problem = zeroProblem(c)) return problem;
  if (auto problem = options::checkRanges(trainOptionTable(), c)) return problem;
  if (!c.logFile.empty()) {
    if (auto problem = logPatternProblem(c.logFile)) return problem;
  }
  if (c.resume == "auto" && c.checkpointDir.empty()) {
    return "--resume auto needs --checkpoint-dir, the folder to look for checkpoints in";
  }
  if (!c.initFrom.empty() && c.resume != "none" && c.resume != "auto") {
    return "--init-from starts a new run and --resume " + c.resume +
           " continues a saved one: give one of them (--resume auto takes --init-from when "
           "--checkpoint-dir has no checkpoint yet)";
  }
  if (!c.synthetic && c.model != ModelKind::kLinreg) {
    if (const auto problem = base::folderProblem(c.dataDir)) {
      const std::string prepare = c.model == ModelKind::kGpt
                                      ? "prepare a corpus with data/prepare_fortunes.sh --out "
                                      : "fetch MNIST with data/fetch_mnist.sh ";
      return "--data " + c.dataDir + ": " + *problem + " (" + prepare + c.dataDir +
             ", or train on --synthetic data)";
    }
  }
  return std::nullopt;
}

models::GptShape presetShape(GptPreset preset) {
  if (preset == GptPreset::kGpt2Small)
    return {.layers = 12, .heads = 12, .width = 768, .context = 1024, .vocabulary = 50257};
  return {.layers = 4, .heads = 4, .width = 256, .context = 128, .vocabulary = 50257};
}

std::optional<std::string> parseTrainConfig(int argc, const char* const* argv, TrainConfig& c,
                                            bool& help, std::string& helpText) {
  const options::Program program{"train", "usage: mpirun -np N ringtrain train [options]"};
  if (auto error =
          parseProgram(program, trainOptionTable(), argc, argv, c, help, helpText, c.parseWarnings))
    return error;
  if (help) return std::nullopt;
  if (c.resume == "default" || c.resume.empty()) c.resume = "none";
  return validateTrainConfig(c);
}

std::optional<std::string> parseGenerateConfig(int argc, const char* const* argv,
                                               GenerationOptions& o, bool& help,
                                               std::string& helpText) {
  const options::Program program{"generate",
                                 "usage: ringtrain generate --checkpoint FILE [options]"};
  std::vector<std::string> warnings;
  auto error =
      parseProgram(program, generateOptionTable(), argc, argv, o, help, helpText, warnings);
  for (const std::string& warning : warnings)
    logLine(LogLevel::kWarn, "warning: " + warning);
  return error;
}

std::vector<std::pair<std::string, std::string>> comparableOptions(const TrainConfig& c) {
  return options::comparedItems(trainOptionTable(), c);
}

std::string configLines(const TrainConfig& c) {
  return options::savedLines(trainOptionTable(), c);
}

bool prefetchesInBackground(const TrainConfig& c, bool dataReadsStorage) {
  if (c.prefetch != Prefetch::kAuto) return c.prefetch == Prefetch::kOn;
  return c.device == Device::kCuda || dataReadsStorage;
}

engine::ExchangeOptions exchangeOptions(const TrainConfig& c) {
  engine::ExchangeOptions options = engine::exchangeOptionsOf(c.exchange);
  options.shardUpdates = c.zero == 1;
  options.test.stallRank = c.test.stallRank;
  options.test.stallCollective = c.test.stallCollective;
  options.test.stallSeconds = c.test.stallSeconds;
  return options;
}

std::string describe(const TrainConfig& c) {
  std::ostringstream out;
  const auto list = intListText;
  out << "model " << nameIn(kModelNames, c.model);
  if (c.model == ModelKind::kMlp) out << " hidden " << list(c.hidden);
  if (c.model == ModelKind::kGpt) {
    out << " (" << c.gpt.layers << " layers, " << c.gpt.heads << " heads, width " << c.gpt.width
        << ", context " << c.gpt.context << ", vocabulary " << c.gpt.vocabulary << ")";
  }
  const std::string synthetic =
      c.model == ModelKind::kGpt ? "synthetic tokens" : "synthetic " + list(c.syntheticShape);
  out << ", data " << (c.synthetic ? synthetic : c.dataDir);
  out << ", batch " << c.batchSize << "/rank";
  if (c.accumulateSteps > 1) out << " x " << c.accumulateSteps << " accumulated";
  out << ", epochs " << c.epochs;
  if (c.steps > 0) out << ", steps " << c.steps;
  out << ", " << nameIn(kOptimizerNames, c.optimizer) << " lr " << c.learningRate;
  if (c.optimizer == OptimizerKind::kSgd)
    out << " momentum " << c.momentum << (c.nesterov ? " nesterov" : "");
  if (c.weightDecay > 0) out << " weight-decay " << c.weightDecay;
  if (c.clipGradNorm > 0) out << " clip-grad-norm " << c.clipGradNorm;
  out << ", schedule " << nameIn(kLrScheduleNames, c.lrSchedule);
  if (c.warmupSteps > 0) out << " warm-up " << c.warmupSteps;
  if (c.scaleLr) out << " (scaled by ranks)";
  out << ", device " << nameIn(kDeviceNames, c.device) << (c.tf32 ? " tf32" : "");
  if (c.precision != models::Precision::kFloat32)
    out << " precision " << nameIn(models::kPrecisionNames, c.precision);
  out << ", backend " << options::name(c.exchange.backend)
      << (c.exchange.overlap ? " overlap" : " no overlap") << " fusion "
      << (c.exchange.fusionThresholdBytes >> 10) << " KiB";
  if (c.exchange.compression != engine::Compression::kNone)
    out << " compression " << engine::name(c.exchange.compression);
  out << ", seed " << c.seed;
  return out.str();
}

}  // namespace ringtrain::training
