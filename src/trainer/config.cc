#include "src/trainer/config.h"

#include <fmt/format.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace ringtrain {
namespace po = boost::program_options;

std::optional<std::vector<int>> parseIntList(const std::string& text) {
  std::vector<int> values;
  std::string item;
  std::stringstream stream(text);
  while (std::getline(stream, item, ',')) {
    if (item.empty() || item.size() > 9 ||
        !std::all_of(item.begin(), item.end(), [](unsigned char c) { return std::isdigit(c); })) {
      return std::nullopt;
    }
    const int value = std::stoi(item);
    if (value <= 0) return std::nullopt;
    values.push_back(value);
  }
  if (values.empty()) return std::nullopt;
  return values;
}

namespace {

// A default as --help shows it: 0.1, not 0.10000000000000001.
std::string shortest(double value) {
  return fmt::format("{}", value);
}

struct RawOptions {
  std::string hidden = "512,512";
  std::string syntheticShape = "1,28,28";
  std::string overlap = "on";
  std::string fusionThreshold = "8M";
};

po::options_description trainOptions(TrainConfig& c, RawOptions& raw) {
  // One option per line reads as the table it is.
  // clang-format off
  po::options_description model("Model");
  model.add_options()
      ("model", po::value(&c.model)->default_value(c.model), "linreg | mlp | cnn")
      ("hidden", po::value(&raw.hidden)->default_value(raw.hidden), "mlp hidden layer sizes, comma-separated");
  po::options_description data("Data");
  data.add_options()
      ("data", po::value(&c.dataDir)->default_value(c.dataDir), "folder with train.h5 and test.h5 (ringtrain's HDF5 layout; idx_to_hdf5 writes it), or else the MNIST IDX files (plain or .gz; data/fetch_mnist.sh)")
      ("synthetic", po::value(&c.synthetic)->implicit_value(true)->default_value(false), "train on synthetic data (a throughput benchmark)")
      ("synthetic-shape", po::value(&raw.syntheticShape)->default_value(raw.syntheticShape), "synthetic image shape C,H,W")
      ("synthetic-classes", po::value(&c.syntheticClasses)->default_value(c.syntheticClasses), "synthetic number of classes")
      ("synthetic-size", po::value(&c.syntheticSize)->default_value(c.syntheticSize), "synthetic training samples")
      ("drop-last", po::value(&c.dropLast)->implicit_value(true)->default_value(false), "drop each epoch's last, smaller batch")
      ("prefetch", po::value(&c.prefetch)->default_value(c.prefetch), "auto | on | off: gather the next batch on a thread of its own while the step trains (auto: on with --device cuda or HDF5 data, off for data in memory on the CPU, where the thread would only take time from the rank's core)");
  po::options_description run("Run");
  run.add_options()
      ("epochs", po::value(&c.epochs)->default_value(c.epochs), "passes over the training data")
      ("steps", po::value(&c.steps)->default_value(c.steps), "stop after this many steps (0: run all epochs)")
      ("batch-size", po::value(&c.batchSize)->default_value(c.batchSize), "samples per rank per step")
      ("seed", po::value(&c.seed)->default_value(c.seed), "seed of the initial weights and the data order")
      ("eval-every", po::value(&c.evalEvery)->default_value(c.evalEvery), "also evaluate every N steps (0: at each epoch's end only)")
      ("log-every", po::value(&c.logEvery)->default_value(c.logEvery), "log the training loss every N steps")
      ("device", po::value(&c.device)->default_value(c.device), "auto | cpu | cuda: train on the CPU or on one GPU per rank; auto takes cuda when the build has the GPU path and every node has a GPU for each of its ranks")
      ("tf32", po::value(&c.tf32)->implicit_value(true)->default_value(false), "cuda: TF32 tensor-core matrix products (faster; about 1e-3 relative error in the products)")
      ("backend", po::value(&c.backend)->default_value(c.backend), "gradient all-reduce: auto (ring on cpu, nccl on cuda) | mpi | ring | hierarchical | shm (host buffers; shm: shared memory, one node) | nccl (GPU buffers)")
      ("shm-parameters", po::value(&c.shmParameters)->default_value(c.shmParameters), "with --backend shm: per-rank (every rank keeps and updates its own copy of the parameters) | shared (the ranks of the node keep one copy of the parameters and optimiser state, and each element is updated by the rank that averaged it: faster where one core reads what another wrote cheaply, slower where not) | auto (shared while a probe every 50 steps finds a cache line crossing between cores in under 150 ns, else per-rank); --check-finite stop/skip take per-rank")
      ("expect-world-size", po::value(&c.expectWorldSize)->default_value(c.expectWorldSize), "refuse to run unless mpirun started exactly this many ranks (0: any)");
  po::options_description engine("Gradient engine");
  engine.add_options()
      ("overlap", po::value(&raw.overlap)->default_value(raw.overlap), "on | off: average gradients while backward still runs")
      ("fusion-threshold", po::value(&raw.fusionThreshold)->default_value(raw.fusionThreshold), "largest gradient bucket (bytes; 64K, 8M, ...)")
      ("compression", po::value(&c.compression)->default_value(c.compression), "none | fp16 | bf16: gradients cross the wire in 16 bits")
      ("stall-timeout", po::value(&c.stallTimeoutSeconds)->default_value(c.stallTimeoutSeconds), "abort the job, naming the missing ranks, when a collective waits this many seconds (0: never)")
      ("check-finite", po::value(&c.checkFinite)->default_value(c.checkFinite), "off | stop | skip: stop the job or skip the step on NaN/Inf averaged gradients")
      ("timeline", po::value(&c.timeline), "write a Chrome trace (Perfetto, chrome://tracing) of every rank to this file");
  po::options_description optimiser("Optimiser");
  optimiser.add_options()
      ("optimizer", po::value(&c.optimizer)->default_value(c.optimizer), "sgd | adam | adamw")
      ("lr", po::value(&c.learningRate)->default_value(c.learningRate, shortest(c.learningRate)), "learning rate")
      ("momentum", po::value(&c.momentum)->default_value(c.momentum, shortest(c.momentum)), "sgd momentum")
      ("nesterov", po::value(&c.nesterov)->implicit_value(true)->default_value(false), "sgd: Nesterov momentum")
      ("weight-decay", po::value(&c.weightDecay)->default_value(c.weightDecay, shortest(c.weightDecay)), "L2 penalty (sgd, adam) or decoupled decay (adamw)")
      ("beta1", po::value(&c.beta1)->default_value(c.beta1, shortest(c.beta1)), "adam: first-moment decay")
      ("beta2", po::value(&c.beta2)->default_value(c.beta2, shortest(c.beta2)), "adam: second-moment decay")
      ("epsilon", po::value(&c.epsilon)->default_value(c.epsilon, shortest(c.epsilon)), "adam: denominator term")
      ("lr-schedule", po::value(&c.lrSchedule)->default_value(c.lrSchedule), "constant | step | cosine")
      ("warmup-steps", po::value(&c.warmupSteps)->default_value(c.warmupSteps), "linear warm-up steps")
      ("lr-step-size", po::value(&c.lrStepSize)->default_value(c.lrStepSize), "step schedule: steps between decays")
      ("lr-gamma", po::value(&c.lrGamma)->default_value(c.lrGamma, shortest(c.lrGamma)), "step schedule: decay factor")
      ("scale-lr", po::value(&c.scaleLr)->implicit_value(true)->default_value(false), "multiply the learning rate by the number of ranks");
  po::options_description storage("Checkpoints, resume, logs, SIGTERM");
  storage.add_options()
      ("checkpoint-dir", po::value(&c.checkpointDir), "rank 0 writes checkpoints (ckpt-<step>.h5, `latest`) to this folder")
      ("checkpoint-every", po::value(&c.checkpointEvery)->default_value(c.checkpointEvery), "steps between checkpoints (0: at each epoch's end); one more at the end and on SIGTERM")
      ("keep", po::value(&c.keep)->default_value(c.keep), "checkpoints kept, the newest (0: all)")
      ("resume", po::value(&c.resume)->default_value(c.resume), "none | auto (the newest good checkpoint of --checkpoint-dir; none there: start afresh) | a checkpoint file or folder")
      ("on-resize", po::value(&c.onResize)->default_value(c.onResize), "resumed on another number of ranks: keep-global-batch (batch per rank = saved global batch / ranks) | keep-per-rank-batch (lr scaled by new/saved global batch)")
      ("logdir", po::value(&c.logdir), "rank 0 writes TensorBoard event files (train/, test/) and metrics.jsonl here")
      ("sigterm-grace", po::value(&c.sigtermGraceSeconds)->default_value(c.sigtermGraceSeconds), "on SIGTERM the ranks agree on a step, write a final checkpoint and exit within this many seconds (0: SIGTERM kills at once)")
      ("sigterm-exit-code", po::value(&c.sigtermExitCode)->default_value(c.sigtermExitCode), "exit status of a run stopped by SIGTERM (143: rerun with --resume auto; 0: report success)");
  // clang-format on
  po::options_description all("ringtrain train options");
  all.add(model).add(data).add(run).add(engine).add(optimiser).add(storage);
  return all;
}

std::string optionsWithoutDefaultsText(const po::options_description& description) {
  std::ostringstream out;
  out << description;
  return out.str();
}

}  // namespace

std::optional<std::string> parseTrainConfig(int argc, const char* const* argv, TrainConfig& c,
                                            bool& help, std::string& helpText) {
  RawOptions raw;
  po::options_description options = trainOptions(c, raw);
  po::options_description generic;
  generic.add_options()("help,h", "print this help")(
      "config", po::value(&c.configFile), "read options from this file (`name = value` lines)");
  // Test-only fault injection: parsed, never shown in --help.
  po::options_description faults;
  faults.add_options()("test-stall-rank", po::value(&c.testStallRank))(
      "test-stall-collective", po::value(&c.testStallCollective))("test-nan-step",
                                                                  po::value(&c.testNanStep))(
      "test-step-sleep-ms", po::value(&c.testStepSleepMs))("test-switch-sharing-every",
                                                           po::value(&c.testSwitchSharingEvery));
  po::options_description commandLine;
  commandLine.add(generic).add(options).add(faults);
  po::options_description shown;
  shown.add(generic).add(options);

  std::set<std::string> names;
  for (const auto& option : options.options())
    names.insert(option->long_name());
  try {
    po::variables_map values;
    po::store(po::command_line_parser(argc, argv).options(commandLine).run(), values);
    // RINGTRAIN_BATCH_SIZE -> batch-size; variables that are no option (RINGTRAIN_BUILD_DIR, used
    // by the scripts) are not ours to judge and are ignored.
    po::store(po::parse_environment(options,
                                    [&](const std::string& variable) -> std::string {
                                      const std::string prefix = "RINGTRAIN_";
                                      if (variable.rfind(prefix, 0) != 0) return "";
                                      std::string name = variable.substr(prefix.size());
                                      for (char& ch : name) {
                                        ch = ch == '_' ? '-'
                                                       : static_cast<char>(std::tolower(
                                                             static_cast<unsigned char>(ch)));
                                      }
                                      return names.count(name) ? name : "";
                                    }),
              values);
    if (values.count("help")) {
      help = true;
      helpText = "usage: ringtrain train [options]\n\n" + optionsWithoutDefaultsText(shown);
      return std::nullopt;
    }
    if (values.count("config")) {
      const std::string path = values["config"].as<std::string>();
      std::ifstream file(path);
      if (!file) return "--config " + path + ": cannot open the file";
      po::store(po::parse_config_file(file, options), values);
    }
    po::notify(values);
  } catch (const po::error& e) {
    return std::string(e.what());
  }
  const auto hidden = parseIntList(raw.hidden);
  if (!hidden) return "--hidden '" + raw.hidden + "': expected positive sizes like 512,512";
  c.hidden = *hidden;
  std::string shape = raw.syntheticShape;
  std::replace(shape.begin(), shape.end(), 'x', ',');
  const auto parsedShape = parseIntList(shape);
  if (!parsedShape || parsedShape->size() != 3) {
    return "--synthetic-shape '" + raw.syntheticShape + "': expected C,H,W like 1,28,28";
  }
  c.syntheticShape = *parsedShape;
  if (raw.overlap != "on" && raw.overlap != "off") {
    return "--overlap '" + raw.overlap + "': expected on or off";
  }
  c.overlap = raw.overlap == "on";
  const auto threshold = parseByteSize(raw.fusionThreshold);
  if (!threshold || *threshold == 0) {
    return "--fusion-threshold '" + raw.fusionThreshold + "': expected a size like 64K or 8M";
  }
  c.fusionThresholdBytes = *threshold;
  if (c.resume == "default" || c.resume.empty()) c.resume = "none";
  return validateTrainConfig(c);
}

bool prefetchesInBackground(const TrainConfig& c, bool dataReadsStorage) {
  if (c.prefetch != "auto") return c.prefetch == "on";
  return c.device == "cuda" || dataReadsStorage;
}

std::optional<std::string> validateTrainConfig(const TrainConfig& c) {
  auto oneOf = [](const std::string& value, std::initializer_list<const char*> allowed) {
    return std::any_of(allowed.begin(), allowed.end(), [&](const char* a) { return value == a; });
  };
  if (!oneOf(c.model, {"linreg", "mlp", "cnn"})) {
    return "--model '" + c.model + "': unknown model (linreg, mlp, cnn)";
  }
  if (!oneOf(c.optimizer, {"sgd", "adam", "adamw"})) {
    return "--optimizer '" + c.optimizer + "': unknown optimiser (sgd, adam, adamw)";
  }
  if (!oneOf(c.lrSchedule, {"constant", "step", "cosine"})) {
    return "--lr-schedule '" + c.lrSchedule + "': unknown schedule (constant, step, cosine)";
  }
  if (!oneOf(c.device, {"auto", "cpu", "cuda"})) {
    return "--device '" + c.device + "': expected auto, cpu or cuda";
  }
  if (!oneOf(c.backend, {"auto", "mpi", "ring", "hierarchical", "shm", "nccl"})) {
    return "--backend '" + c.backend +
           "': unknown backend (auto, mpi, ring, hierarchical, shm, nccl)";
  }
  if (c.backend == "nccl" && c.device == "cpu") {
    return "--backend nccl averages GPU buffers: it needs --device cuda (--device cpu takes mpi, "
           "ring, hierarchical or shm)";
  }
  if (c.backend == "shm" && c.compression != "none") {
    return "--compression " + c.compression +
           " makes gradient messages smaller, and --backend shm sends none: use ring, mpi or "
           "hierarchical with it";
  }
  if (c.device == "cuda" && oneOf(c.backend, {"mpi", "ring", "hierarchical", "shm"})) {
    return "--backend " + c.backend +
           " averages host buffers: with --device cuda use --backend nccl (or auto)";
  }
  if (!oneOf(c.shmParameters, {"per-rank", "shared", "auto"})) {
    return "--shm-parameters '" + c.shmParameters + "': expected per-rank, shared or auto";
  }
  if (c.expectWorldSize < 0) return "--expect-world-size must not be negative";
  if (!oneOf(c.compression, {"none", "fp16", "bf16"})) {
    return "--compression '" + c.compression + "': unknown (none, fp16, bf16)";
  }
  if (c.compression != "none" && (c.device == "cuda" || c.backend == "nccl")) {
    return "--compression " + c.compression +
           " is not supported on the GPU yet (the 16-bit conversion runs on the host): use "
           "--compression none with --device cuda";
  }
  if (!oneOf(c.checkFinite, {"off", "stop", "skip"})) {
    return "--check-finite '" + c.checkFinite + "': expected off, stop or skip";
  }
  if (!(c.stallTimeoutSeconds >= 0)) return "--stall-timeout must not be negative";
  if (c.batchSize < 1)
    return "--batch-size must be at least 1 (got " + std::to_string(c.batchSize) + ")";
  if (c.epochs < 1) return "--epochs must be at least 1 (got " + std::to_string(c.epochs) + ")";
  if (c.steps < 0) return "--steps must not be negative";
  if (!(c.learningRate > 0))
    return "--lr must be greater than 0 (got " + std::to_string(c.learningRate) + ")";
  if (c.momentum < 0 || c.momentum >= 1) return "--momentum must be in [0, 1)";
  if (c.weightDecay < 0) return "--weight-decay must not be negative";
  if (c.beta1 < 0 || c.beta1 >= 1 || c.beta2 < 0 || c.beta2 >= 1)
    return "--beta1 and --beta2 must be in [0, 1)";
  if (!(c.epsilon > 0)) return "--epsilon must be greater than 0";
  if (c.warmupSteps < 0) return "--warmup-steps must not be negative";
  if (c.lrStepSize < 1) return "--lr-step-size must be at least 1";
  if (!(c.lrGamma > 0) || c.lrGamma > 1) return "--lr-gamma must be in (0, 1]";
  if (c.evalEvery < 0 || c.logEvery < 0) return "--eval-every and --log-every must not be negative";
  if (c.checkpointEvery < 0) return "--checkpoint-every must not be negative";
  if (c.keep < 0) return "--keep must not be negative (0 keeps every checkpoint)";
  if (c.resume == "auto" && c.checkpointDir.empty()) {
    return "--resume auto needs --checkpoint-dir, the folder to look for checkpoints in";
  }
  if (!oneOf(c.onResize, {"keep-global-batch", "keep-per-rank-batch"})) {
    return "--on-resize '" + c.onResize + "': expected keep-global-batch or keep-per-rank-batch";
  }
  if (!oneOf(c.prefetch, {"auto", "on", "off"})) {
    return "--prefetch '" + c.prefetch + "': expected auto, on or off";
  }
  if (!(c.sigtermGraceSeconds >= 0)) return "--sigterm-grace must not be negative";
  if (c.sigtermExitCode < 0 || c.sigtermExitCode > 255) {
    return "--sigterm-exit-code must be in [0, 255] (got " + std::to_string(c.sigtermExitCode) +
           ")";
  }
  if (c.testStepSleepMs < 0) return "--test-step-sleep-ms must not be negative";
  if (c.testSwitchSharingEvery < 0) return "--test-switch-sharing-every must not be negative";
  if (c.syntheticClasses < 2) return "--synthetic-classes must be at least 2";
  if (c.syntheticSize < 1) return "--synthetic-size must be at least 1";
  if (!c.synthetic && c.model != "linreg") {
    std::error_code error;
    if (!std::filesystem::is_directory(c.dataDir, error)) {
      return "--data " + c.dataDir + ": no such folder (fetch MNIST with data/fetch_mnist.sh " +
             c.dataDir + ", or train on --synthetic data)";
    }
  }
  return std::nullopt;
}

std::optional<std::size_t> parseByteSize(const std::string& text) {
  std::size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits])))
    ++digits;
  if (digits == 0 || digits > 15) return std::nullopt;
  const std::size_t value = std::stoull(text.substr(0, digits));
  const std::string unit = text.substr(digits);
  if (unit.empty() || unit == "B") return value;
  if (unit == "K" || unit == "KiB" || unit == "k") return value << 10;
  if (unit == "M" || unit == "MiB") return value << 20;
  if (unit == "G" || unit == "GiB") return value << 30;
  return std::nullopt;
}

std::vector<std::pair<std::string, std::string>> comparableOptions(const TrainConfig& c) {
  auto list = [](const std::vector<int>& values) {
    std::string text;
    for (const int v : values)
      text += (text.empty() ? "" : ",") + std::to_string(v);
    return text;
  };
  auto number = [](double v) {
    std::ostringstream out;
    out << v;
    return out.str();
  };
  return {
      {"--model", c.model},
      {"--hidden", list(c.hidden)},
      {"--synthetic", c.synthetic ? "true" : "false"},
      {"--synthetic-shape", list(c.syntheticShape)},
      {"--synthetic-classes", std::to_string(c.syntheticClasses)},
      {"--synthetic-size", std::to_string(c.syntheticSize)},
      {"--drop-last", c.dropLast ? "true" : "false"},
      {"--epochs", std::to_string(c.epochs)},
      {"--steps", std::to_string(c.steps)},
      {"--batch-size", std::to_string(c.batchSize)},
      {"--seed", std::to_string(c.seed)},
      {"--eval-every", std::to_string(c.evalEvery)},
      {"--log-every", std::to_string(c.logEvery)},
      {"--optimizer", c.optimizer},
      {"--lr", number(c.learningRate)},
      {"--momentum", number(c.momentum)},
      {"--nesterov", c.nesterov ? "true" : "false"},
      {"--weight-decay", number(c.weightDecay)},
      {"--beta1", number(c.beta1)},
      {"--beta2", number(c.beta2)},
      {"--epsilon", number(c.epsilon)},
      {"--lr-schedule", c.lrSchedule},
      {"--warmup-steps", std::to_string(c.warmupSteps)},
      {"--lr-step-size", std::to_string(c.lrStepSize)},
      {"--lr-gamma", number(c.lrGamma)},
      {"--scale-lr", c.scaleLr ? "true" : "false"},
      {"--device", c.device},
      {"--tf32", c.tf32 ? "true" : "false"},
      {"--backend", c.backend},
      {"--overlap", c.overlap ? "on" : "off"},
      {"--shm-parameters", c.shmParameters},
      {"--fusion-threshold", std::to_string(c.fusionThresholdBytes)},
      {"--compression", c.compression},
      {"--stall-timeout", number(c.stallTimeoutSeconds)},
      {"--check-finite", c.checkFinite},
      // Every rank takes part in the per-step SIGTERM check, or none does.
      {"--sigterm-grace", number(c.sigtermGraceSeconds)},
  };
}

std::string configLines(const TrainConfig& c) {
  std::string text;
  const auto add = [&](std::string_view name, const std::string& value) {
    text.append(name).append(" = ").append(value).append("\n");
  };
  for (const auto& [option, value] : comparableOptions(c))
    add(std::string_view(option).substr(2), value);
  add("data", c.dataDir);
  add("checkpoint-dir", c.checkpointDir);
  add("checkpoint-every", std::to_string(c.checkpointEvery));
  add("keep", std::to_string(c.keep));
  add("on-resize", c.onResize);
  add("logdir", c.logdir);
  return text;
}

std::string describe(const TrainConfig& c) {
  std::ostringstream out;
  auto list = [](const std::vector<int>& values) {
    std::string text;
    for (int v : values)
      text += (text.empty() ? "" : ",") + std::to_string(v);
    return text;
  };
  out << "model " << c.model;
  if (c.model == "mlp") out << " hidden " << list(c.hidden);
  out << ", data " << (c.synthetic ? "synthetic " + list(c.syntheticShape) : c.dataDir);
  out << ", batch " << c.batchSize << "/rank, epochs " << c.epochs;
  if (c.steps > 0) out << ", steps " << c.steps;
  out << ", " << c.optimizer << " lr " << c.learningRate;
  if (c.optimizer == "sgd") out << " momentum " << c.momentum << (c.nesterov ? " nesterov" : "");
  if (c.weightDecay > 0) out << " weight-decay " << c.weightDecay;
  out << ", schedule " << c.lrSchedule;
  if (c.warmupSteps > 0) out << " warm-up " << c.warmupSteps;
  if (c.scaleLr) out << " (scaled by ranks)";
  out << ", device " << c.device << (c.tf32 ? " tf32" : "");
  out << ", backend " << c.backend << (c.overlap ? " overlap" : " no overlap") << " fusion "
      << (c.fusionThresholdBytes >> 10) << " KiB";
  if (c.compression != "none") out << " compression " << c.compression;
  out << ", seed " << c.seed;
  return out.str();
}

}  // namespace ringtrain
