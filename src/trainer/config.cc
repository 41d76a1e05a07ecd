#include "src/trainer/config.h"

#include <fmt/format.h>
#include <unistd.h>  // environ

#include <algorithm>
#include <boost/program_options.hpp>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

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

// --backend's choices: auto, then the engine's table.
std::vector<NamedValue<std::optional<engine::ExchangeBackend>>> backendChoices() {
  std::vector<NamedValue<std::optional<engine::ExchangeBackend>>> choices = {
      {std::nullopt, "auto"}};
  for (const auto& entry : engine::kExchangeBackendNames)
    choices.push_back({entry.value, entry.name});
  return choices;
}

// "auto | cpu | cuda: " for a help text.
template <class Table>
std::string choicesHelp(const Table& table, std::string_view what) {
  return joinNames(table, " | ", " | ") + ": " + std::string(what);
}

// Reads `text` as one of `table`'s names into `value`; the error names the option and the
// choices.
template <class Table, class Value>
std::optional<std::string> parseChoice(std::string_view option, const std::string& text,
                                       const Table& table, Value& value) {
  if (const auto parsed = valueIn(table, text)) {
    value = *parsed;
    return std::nullopt;
  }
  return fmt::format("--{} '{}': expected {}", option, text, joinNames(table, ", ", " or "));
}

// The options whose text is converted after parsing (lists, sizes, modes), as given.
struct RawOptions {
  std::string model = "mlp";
  std::string hidden = "512,512";
  // --layers --heads --width --context --vocab: each changes the preset's size when given.
  std::optional<int> layers, heads, width, context, vocab;
  std::string syntheticShape = "1,28,28";
  std::string prefetch = "auto";
  std::string device = "auto";
  std::string backend = "auto";
  std::string overlap = "on";
  std::string fusionThreshold = "8M";
  std::string compression = "none";
  std::string precision = "fp32";
  std::string checkFinite = "off";
  std::string optimizer = "sgd";
  std::string lrSchedule = "cosine";
  std::string onResize = "keep-global-batch";
  std::string logLevel = "info";
  std::string removedShmParameters;  // --shm-parameters, removed
  std::string failAt = "none";       // --test-fail-at
};

po::options_description modelAndDataOptions(TrainConfig& c, RawOptions& raw) {
  // One option per line reads as the table it is.
  // clang-format off
  po::options_description model("Model and data");
  model.add_options()
      ("model", po::value(&raw.model)->default_value(raw.model), (joinNames(kModelNames, " | ", " | ") + " | " + joinNames(kGptPresetNames, " | ", " | ") + " (gpt-mini: 4 layers, 4 heads, width 256, context 128; gpt2-124m: 12, 12, 768, 1024; both with GPT-2's vocabulary of 50257; gpt is gpt-mini)").c_str())
      ("hidden", po::value(&raw.hidden)->default_value(raw.hidden), "mlp hidden layer sizes, comma-separated")
      ("layers", po::value<int>()->notifier([&raw](int v) { raw.layers = v; }), "gpt: transformer blocks")
      ("heads", po::value<int>()->notifier([&raw](int v) { raw.heads = v; }), "gpt: attention heads (divide --width)")
      ("width", po::value<int>()->notifier([&raw](int v) { raw.width = v; }), "gpt: embedding width C")
      ("context", po::value<int>()->notifier([&raw](int v) { raw.context = v; }), "gpt: tokens per sequence T")
      ("vocab", po::value<int>()->notifier([&raw](int v) { raw.vocab = v; }), "gpt: vocabulary size (the token files' ids must lie below it)")
      ("data", po::value(&c.dataDir)->default_value(c.dataDir), "folder with train.h5 and test.h5 (ringtrain's HDF5 layout; idx_to_hdf5 writes it), or else the MNIST IDX files (plain or .gz; data/fetch_mnist.sh)")
      ("synthetic", po::value(&c.synthetic)->implicit_value(true)->default_value(false), "train on synthetic data (a throughput benchmark)")
      ("synthetic-shape", po::value(&raw.syntheticShape)->default_value(raw.syntheticShape), "synthetic image shape C,H,W")
      ("synthetic-classes", po::value(&c.syntheticClasses)->default_value(c.syntheticClasses), "synthetic number of classes")
      ("synthetic-size", po::value(&c.syntheticSize)->default_value(c.syntheticSize), "synthetic training samples")
      ("drop-last", po::value(&c.dropLast)->implicit_value(true)->default_value(false), "drop each epoch's last, smaller batch")
      ("prefetch", po::value(&raw.prefetch)->default_value(raw.prefetch), choicesHelp(kPrefetchNames, "gather the next batch on a thread of its own while the step trains (auto: on with --device cuda or HDF5 data, off for data in memory on the CPU, where the thread would only take time from the rank's core)").c_str());
  // clang-format on
  return model;
}

po::options_description runOptions(TrainConfig& c, RawOptions& raw) {
  // clang-format off
  po::options_description run("Run");
  run.add_options()
      ("epochs", po::value(&c.epochs)->default_value(c.epochs), "passes over the training data")
      ("steps", po::value(&c.steps)->default_value(c.steps), "stop after this many steps (0: run all epochs)")
      ("batch-size", po::value(&c.batchSize)->default_value(c.batchSize), "samples per rank per micro-batch (per step without --accumulate-steps)")
      ("accumulate-steps", po::value(&c.accumulateSteps)->default_value(c.accumulateSteps), "micro-batches whose gradients are summed before one average and one optimiser step (a step trains on accumulate-steps x batch-size samples per rank)")
      ("seed", po::value(&c.seed)->default_value(c.seed), "seed of the initial weights and the data order")
      ("eval-every", po::value(&c.evalEvery)->default_value(c.evalEvery), "also evaluate every N steps (0: at each epoch's end only)")
      ("eval-samples", po::value(&c.evalSamples)->default_value(c.evalSamples), "evaluate on N test samples spread over the test set, e.g. validation sequences; the run's last evaluation takes all (0: all, always)")
      ("log-every", po::value(&c.logEvery)->default_value(c.logEvery), "log the training loss every N steps")
      ("device", po::value(&raw.device)->default_value(raw.device), choicesHelp(kDeviceNames, "train on the CPU or on one GPU per rank; auto takes cuda when the build has the GPU path and every node has a GPU for each of its ranks").c_str())
      ("tf32", po::value(&c.tf32)->implicit_value(true)->default_value(false), "cuda: TF32 tensor-core matrix products (faster, with a larger rounding error in the products)")
      ("precision", po::value(&raw.precision)->default_value(raw.precision), choicesHelp(kPrecisionNames, "the CPU's matrix products: float32, or bfloat16 inputs with float32 accumulation (needs a CPU with AVX512-BF16; weights, optimiser state, loss and softmax stay float32)").c_str())
      ("expect-world-size", po::value(&c.expectWorldSize)->default_value(c.expectWorldSize), "refuse to run unless mpirun started exactly this many ranks (0: any)");
  // clang-format on
  return run;
}

// The gradient exchange's options, which `ringtrain bench` takes too.
void addExchangeOptions(po::options_description& engine, TrainConfig& c, RawOptions& raw) {
  // clang-format off
  engine.add_options()
      ("backend", po::value(&raw.backend)->default_value(raw.backend), choicesHelp(backendChoices(), "how gradients are averaged; auto: shm where every rank shares one node (cpu), tuned across nodes, nccl on cuda; mpi, ring, tuned (each all-reduce's algorithm by its size, from --tuning-file), hierarchical, shm average host buffers, nccl GPU buffers").c_str())
      ("tuning-file", po::value(&c.tuningFile), "tuned backend: the table allreduce_perf --autotune wrote for this job's ranks (default: the built-in one; a table of other ranks or another CPU is ignored with a warning)")
      ("overlap", po::value(&raw.overlap)->default_value(raw.overlap), "on | off: average gradients while backward still runs")
      ("fusion-threshold", po::value(&raw.fusionThreshold)->default_value(raw.fusionThreshold), "largest gradient bucket (bytes; 64K, 8M, ...)")
      ("compression", po::value(&raw.compression)->default_value(raw.compression), choicesHelp(engine::kCompressionNames, "gradients cross the wire in 16 bits (ring, mpi, hierarchical)").c_str())
      ("stall-timeout", po::value(&c.stallTimeoutSeconds)->default_value(c.stallTimeoutSeconds), "abort the job, naming the missing ranks, when a collective waits this many seconds (a warning at half of it; 0: never)");
  // clang-format on
}

po::options_description engineOptions(TrainConfig& c, RawOptions& raw) {
  po::options_description engine("Gradient engine");
  addExchangeOptions(engine, c, raw);
  // clang-format off
  engine.add_options()
      ("check-finite", po::value(&raw.checkFinite)->default_value(raw.checkFinite), choicesHelp(kCheckFiniteNames, "stop the job or skip the step on NaN/Inf averaged gradients").c_str())
      ("timeline", po::value(&c.timeline), "write a Chrome trace (Perfetto, chrome://tracing) of every rank to this file");
  // clang-format on
  return engine;
}

po::options_description optimiserOptions(TrainConfig& c, RawOptions& raw) {
  // clang-format off
  po::options_description optimiser("Optimiser");
  optimiser.add_options()
      ("optimizer", po::value(&raw.optimizer)->default_value(raw.optimizer), joinNames(kOptimizerNames, " | ", " | ").c_str())
      ("lr", po::value(&c.learningRate)->default_value(c.learningRate, shortest(c.learningRate)), "learning rate")
      ("momentum", po::value(&c.momentum)->default_value(c.momentum, shortest(c.momentum)), "sgd momentum")
      ("nesterov", po::value(&c.nesterov)->implicit_value(true)->default_value(false), "sgd: Nesterov momentum")
      ("weight-decay", po::value(&c.weightDecay)->default_value(c.weightDecay, shortest(c.weightDecay)), "L2 penalty (sgd, adam) or decoupled decay (adamw)")
      ("beta1", po::value(&c.beta1)->default_value(c.beta1, shortest(c.beta1)), "adam: first-moment decay")
      ("beta2", po::value(&c.beta2)->default_value(c.beta2, shortest(c.beta2)), "adam: second-moment decay")
      ("epsilon", po::value(&c.epsilon)->default_value(c.epsilon, shortest(c.epsilon)), "adam: denominator term")
      ("lr-schedule", po::value(&raw.lrSchedule)->default_value(raw.lrSchedule), joinNames(kLrScheduleNames, " | ", " | ").c_str())
      ("warmup-steps", po::value(&c.warmupSteps)->default_value(c.warmupSteps), "linear warm-up steps")
      ("lr-step-size", po::value(&c.lrStepSize)->default_value(c.lrStepSize), "step schedule: steps between decays")
      ("lr-gamma", po::value(&c.lrGamma)->default_value(c.lrGamma, shortest(c.lrGamma)), "step schedule: decay factor")
      ("clip-grad-norm", po::value(&c.clipGradNorm)->default_value(c.clipGradNorm, shortest(c.clipGradNorm)), "scale the averaged gradients down to this global L2 norm when above it, the same on every rank (0: off)")
      ("scale-lr", po::value(&c.scaleLr)->implicit_value(true)->default_value(false), "multiply the learning rate by the number of ranks");
  // clang-format on
  return optimiser;
}

po::options_description storageOptions(TrainConfig& c, RawOptions& raw) {
  // clang-format off
  po::options_description storage("Checkpoints, resume, logs, SIGTERM");
  storage.add_options()
      ("checkpoint-dir", po::value(&c.checkpointDir), "rank 0 writes checkpoints (ckpt-<step>.h5, `latest`) to this folder, which it locks for the run and checks for writing at start")
      ("checkpoint-every", po::value(&c.checkpointEvery)->default_value(c.checkpointEvery), "steps between checkpoints (0: at each epoch's end); one more at the end and on SIGTERM")
      ("keep", po::value(&c.keep)->default_value(c.keep), "checkpoints kept, the newest (0: all)")
      ("resume", po::value(&c.resume)->default_value(c.resume), "none | auto (the newest good checkpoint of --checkpoint-dir; none there: start afresh) | a checkpoint file or folder")
      ("init-from", po::value(&c.initFrom), "start from the weights of this safetensors file (ringtrain export): rank 0 reads it, every rank takes them; with --resume auto only when --checkpoint-dir holds no checkpoint yet")
      ("on-resize", po::value(&raw.onResize)->default_value(raw.onResize), choicesHelp(kOnResizeNames, "resumed on another number of ranks, keep the saved global batch (batch per rank = saved global batch / ranks) or the batch per rank (lr scaled by new/saved global batch)").c_str())
      ("logdir", po::value(&c.logdir), "rank 0 writes TensorBoard event files (train/, test/) and metrics.jsonl here")
      ("log-level", po::value(&raw.logLevel)->default_value(raw.logLevel), choicesHelp(collectives::kLogLevelNames, "the lines shown: errors only, also warnings, also progress, also every rank's details").c_str())
      ("log-file", po::value(&c.logFile), "each rank appends its lines, time-stamped, to this file: %r the rank, %h the host, %% a percent sign (e.g. logs/train-%r.log); the terminal then keeps rank 0's lines and every rank's errors")
      ("sigterm-grace", po::value(&c.sigtermGraceSeconds)->default_value(c.sigtermGraceSeconds), "on SIGTERM the ranks agree on a step, write a final checkpoint and exit within this many seconds (0: SIGTERM kills at once)")
      ("sigterm-exit-code", po::value(&c.sigtermExitCode)->default_value(c.sigtermExitCode), "exit status of a run stopped by SIGTERM (143: rerun with --resume auto; 0: report success)");
  // clang-format on
  return storage;
}

po::options_description trainOptions(TrainConfig& c, RawOptions& raw) {
  po::options_description all("ringtrain train options");
  all.add(modelAndDataOptions(c, raw))
      .add(runOptions(c, raw))
      .add(engineOptions(c, raw))
      .add(optimiserOptions(c, raw))
      .add(storageOptions(c, raw));
  return all;
}

// Parsed, never shown in --help: test-only fault injection, and removed options (so that their
// use gets an error naming what replaced them).
po::options_description hiddenOptions(TrainConfig& c, RawOptions& raw) {
  po::options_description hidden;
  hidden.add_options()("test-stall-rank", po::value(&c.test.stallRank))(
      "test-stall-collective", po::value(&c.test.stallCollective))(
      "test-stall-seconds", po::value(&c.test.stallSeconds))("test-nan-step",
                                                             po::value(&c.test.nanStep))(
      "test-step-sleep-ms", po::value(&c.test.stepSleepMs))("test-fail-at", po::value(&raw.failAt))(
      "test-fail-rank", po::value(&c.test.failRank))("test-fail-step", po::value(&c.test.failStep))(
      "test-no-avx512-bf16", po::bool_switch(&c.test.noAvx512Bf16))(
      "shm-parameters", po::value(&raw.removedShmParameters));
  return hidden;
}

std::string optionsText(const po::options_description& description) {
  std::ostringstream out;
  out << description;
  return out.str();
}

// RINGTRAIN_BATCH_SIZE -> batch-size; variables that are no option (RINGTRAIN_BUILD_DIR, used by
// the scripts) are not ours to judge and are ignored.
std::function<std::string(std::string)> environmentNames(const po::options_description& options) {
  std::set<std::string> names;
  for (const auto& option : options.options())
    names.insert(option->long_name());
  return [names](const std::string& variable) -> std::string {
    const std::string prefix = "RINGTRAIN_";
    if (variable.rfind(prefix, 0) != 0) return "";
    std::string name = variable.substr(prefix.size());
    for (char& ch : name) {
      ch = ch == '_' ? '-' : static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    }
    return names.count(name) ? name : "";
  };
}

// Stores each RINGTRAIN_* variable that names an option on its own, so that a bad value's error
// names the variable: "RINGTRAIN_BATCH_SIZE=many: the argument ('many') ... is invalid". Values
// already stored (the command line's) win.
std::optional<std::string> storeEnvironment(const po::options_description& options,
                                            po::variables_map& values) {
  const auto optionName = environmentNames(options);
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string variable(*entry);
    const std::string key = variable.substr(0, variable.find('='));
    if (optionName(key).empty()) continue;
    try {
      po::store(po::parse_environment(
                    options,
                    [&](const std::string& name) { return name == key ? optionName(name) : ""; }),
                values);
    } catch (const po::error& e) {
      return variable + ": " + e.what();
    }
  }
  return std::nullopt;
}

// `text` without the spaces (and a Windows line end) around it.
std::string trimmed(const std::string& text) {
  const auto first = text.find_first_not_of(" \t\r");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t\r") - first + 1);
}

// Stores a --config file line by line, so that an error names the file and the line:
// "--config run.cfg line 3: batch-size = many: the argument ('many') ... is invalid". Values
// already stored (command line, environment) win; an option given twice in the file is refused,
// as Boost refuses it on the command line.
std::optional<std::string> storeConfigFile(const std::string& path,
                                           const po::options_description& options,
                                           po::variables_map& values) {
  std::ifstream file(path);
  if (!file) return "--config " + path + ": cannot open the file";
  std::map<std::string, int> firstLine;  // option -> the line that gave it
  std::string line;
  for (int number = 1; std::getline(file, line); ++number) {
    const std::string where = fmt::format("--config {} line {}: {}", path, number, trimmed(line));
    try {
      std::istringstream one(line);
      const po::parsed_options parsed = po::parse_config_file(one, options);
      for (const po::option& option : parsed.options) {
        const auto [first, added] = firstLine.emplace(option.string_key, number);
        if (!added) {
          return fmt::format("{}: {} was given on line {} already", where, option.string_key,
                             first->second);
        }
      }
      po::store(parsed, values);
    } catch (const po::error& e) {
      return where + ": " + e.what();
    }
  }
  return std::nullopt;
}

// The exchange options' texts into their values; the first bad one's error.
std::optional<std::string> convertExchangeOptions(const RawOptions& raw, TrainConfig& c) {
  if (auto error = parseChoice("backend", raw.backend, backendChoices(), c.backend)) return error;
  if (auto error =
          parseChoice("compression", raw.compression, engine::kCompressionNames, c.compression))
    return error;
  if (raw.overlap != "on" && raw.overlap != "off")
    return "--overlap '" + raw.overlap + "': expected on or off";
  c.overlap = raw.overlap == "on";
  const auto threshold = parseByteSize(raw.fusionThreshold);
  if (!threshold || *threshold == 0) {
    return "--fusion-threshold '" + raw.fusionThreshold + "': expected a size like 64K or 8M";
  }
  c.fusionThresholdBytes = *threshold;
  return std::nullopt;
}

// The modes' texts into their enums; the first bad one's error.
std::optional<std::string> convertModes(const RawOptions& raw, TrainConfig& c) {
  std::optional<std::string> error;
  const auto parse = [&](std::string_view option, const std::string& text, const auto& table,
                         auto& value) {
    if (!error) error = parseChoice(option, text, table, value);
  };
  if (const auto preset = valueIn(kGptPresetNames, raw.model)) {
    c.model = ModelKind::kGpt;
    c.gpt = presetShape(*preset);
  } else if (const auto kind = valueIn(kModelNames, raw.model)) {
    c.model = *kind;
    if (c.model == ModelKind::kGpt) c.gpt = presetShape(GptPreset::kMini);
  } else {
    error = fmt::format("--model '{}': expected {}, {}", raw.model,
                        joinNames(kModelNames, ", ", ", "),
                        joinNames(kGptPresetNames, ", ", " or "));
  }
  parse("prefetch", raw.prefetch, kPrefetchNames, c.prefetch);
  parse("device", raw.device, kDeviceNames, c.device);
  if (!error) error = convertExchangeOptions(raw, c);
  parse("precision", raw.precision, kPrecisionNames, c.precision);
  parse("check-finite", raw.checkFinite, kCheckFiniteNames, c.checkFinite);
  parse("optimizer", raw.optimizer, kOptimizerNames, c.optimizer);
  parse("lr-schedule", raw.lrSchedule, kLrScheduleNames, c.lrSchedule);
  parse("on-resize", raw.onResize, kOnResizeNames, c.onResize);
  parse("log-level", raw.logLevel, collectives::kLogLevelNames, c.logLevel);
  parse("test-fail-at", raw.failAt, kFailurePointNames, c.test.failAt);
  return error;
}

// The texts that are lists and sizes into their values; the first bad one's error.
std::optional<std::string> convertSizes(const RawOptions& raw, TrainConfig& c) {
  for (const auto& [option, given, value] :
       {std::tuple{"layers", raw.layers, &c.gpt.layers}, {"heads", raw.heads, &c.gpt.heads},
        {"width", raw.width, &c.gpt.width}, {"context", raw.context, &c.gpt.context},
        {"vocab", raw.vocab, &c.gpt.vocabulary}}) {
    if (!given) continue;
    if (c.model != ModelKind::kGpt)
      return fmt::format("--{} is a gpt option: use it with --model gpt", option);
    if (*given < 1) return fmt::format("--{} must be at least 1 (got {})", option, *given);
    *value = *given;
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
  return std::nullopt;
}

}  // namespace

models::GptShape presetShape(GptPreset preset) {
  if (preset == GptPreset::kGpt2Small)
    return {.layers = 12, .heads = 12, .width = 768, .context = 1024, .vocabulary = 50257};
  return {.layers = 4, .heads = 4, .width = 256, .context = 128, .vocabulary = 50257};
}

std::string_view name(const std::optional<engine::ExchangeBackend>& backend) {
  return backend ? engine::name(*backend) : "auto";
}

std::optional<std::string> parseTrainConfig(int argc, const char* const* argv, TrainConfig& c,
                                            bool& help, std::string& helpText) {
  RawOptions raw;
  const po::options_description options = trainOptions(c, raw);
  po::options_description generic;
  generic.add_options()("help,h", "print this help")(
      "config", po::value(&c.configFile), "read options from this file (`name = value` lines)");
  po::options_description everything;
  everything.add(generic).add(options).add(hiddenOptions(c, raw));
  try {
    po::variables_map values;
    po::store(po::command_line_parser(argc, argv).options(everything).run(), values);
    if (auto error = storeEnvironment(options, values)) return error;
    if (values.count("help")) {
      help = true;
      po::options_description shown;
      shown.add(generic).add(options);
      helpText = "usage: ringtrain train [options]\n\n" + optionsText(shown);
      return std::nullopt;
    }
    if (values.count("config")) {
      const std::string path = values["config"].as<std::string>();
      if (auto error = storeConfigFile(path, options, values)) return error;
    }
    po::notify(values);
  } catch (const po::error& e) {
    return std::string(e.what());
  }
  if (!raw.removedShmParameters.empty()) {
    return "--shm-parameters was removed: --backend shm keeps a copy of the parameters on every "
           "rank; drop the option";
  }
  if (auto error = convertModes(raw, c)) return error;
  if (auto error = convertSizes(raw, c)) return error;
  if (c.resume == "default" || c.resume.empty()) c.resume = "none";
  return validateTrainConfig(c);
}

bool prefetchesInBackground(const TrainConfig& c, bool dataReadsStorage) {
  if (c.prefetch != Prefetch::kAuto) return c.prefetch == Prefetch::kOn;
  return c.device == Device::kCuda || dataReadsStorage;
}

namespace {

// The combinations of device, backend and compression that cannot work, or nullopt.
std::optional<std::string> deviceAndBackendProblem(const TrainConfig& c) {
  using engine::ExchangeBackend;
  const std::string backend(name(c.backend));
  const bool hostBackend = c.backend && !engine::averagesDeviceBuffers(*c.backend);
  if (c.backend == ExchangeBackend::kNccl && c.device == Device::kCpu) {
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
  if (c.compression == engine::Compression::kNone) return std::nullopt;
  const std::string compression(engine::name(c.compression));
  if (c.backend == ExchangeBackend::kShm) {
    return "--compression " + compression +
           " makes gradient messages smaller, and --backend shm sends none: use ring, mpi or "
           "hierarchical with it";
  }
  if (c.device == Device::kCuda || c.backend == ExchangeBackend::kNccl) {
    return "--compression " + compression +
           " is not supported on the GPU yet (the 16-bit conversion runs on the host): use "
           "--compression none with --device cuda";
  }
  return std::nullopt;
}

// Infinity or NaN in a floating option, or nullopt. No option has a use for them: where a
// limit may be switched off, 0 already says so, and the hint says that.
std::optional<std::string> nonFiniteProblem(const TrainConfig& c) {
  const struct {
    std::string_view option;
    double value;
    std::string_view hint;
  } values[] = {
      {"lr", c.learningRate, ""},
      {"momentum", c.momentum, ""},
      {"weight-decay", c.weightDecay, ""},
      {"beta1", c.beta1, ""},
      {"beta2", c.beta2, ""},
      {"epsilon", c.epsilon, ""},
      {"lr-gamma", c.lrGamma, ""},
      {"clip-grad-norm", c.clipGradNorm, ""},
      {"stall-timeout", c.stallTimeoutSeconds, " (0 means never)"},
      {"sigterm-grace", c.sigtermGraceSeconds, " (a number of seconds; 0: SIGTERM kills at once)"},
  };
  for (const auto& [option, value, hint] : values) {
    if (!std::isfinite(value)) {
      return fmt::format("--{} must be a finite number (got {}){}", option, value, hint);
    }
  }
  return std::nullopt;
}

// The numbers that must lie in a range, or nullopt.
std::optional<std::string> rangeProblem(const TrainConfig& c) {
  if (auto problem = nonFiniteProblem(c)) return problem;
  if (c.expectWorldSize < 0) return "--expect-world-size must not be negative";
  if (!(c.stallTimeoutSeconds >= 0)) return "--stall-timeout must not be negative";
  if (c.batchSize < 1)
    return "--batch-size must be at least 1 (got " + std::to_string(c.batchSize) + ")";
  if (c.accumulateSteps < 1) {
    return "--accumulate-steps must be at least 1 (got " + std::to_string(c.accumulateSteps) + ")";
  }
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
  if (c.clipGradNorm < 0) return "--clip-grad-norm must not be negative (0: off)";
  if (c.evalEvery < 0 || c.logEvery < 0) return "--eval-every and --log-every must not be negative";
  if (c.evalSamples < 0) return "--eval-samples must not be negative (0: all)";
  if (c.checkpointEvery < 0) return "--checkpoint-every must not be negative";
  if (c.keep < 0) return "--keep must not be negative (0 keeps every checkpoint)";
  if (!(c.sigtermGraceSeconds >= 0)) return "--sigterm-grace must not be negative";
  if (c.sigtermExitCode < 0 || c.sigtermExitCode > 255) {
    return "--sigterm-exit-code must be in [0, 255] (got " + std::to_string(c.sigtermExitCode) +
           ")";
  }
  if (c.test.stepSleepMs < 0) return "--test-step-sleep-ms must not be negative";
  if (c.syntheticClasses < 2) return "--synthetic-classes must be at least 2";
  if (c.syntheticSize < 1) return "--synthetic-size must be at least 1";
  return std::nullopt;
}

}  // namespace

std::optional<std::string> validateTrainConfig(const TrainConfig& c) {
  if (auto problem = deviceAndBackendProblem(c)) return problem;
  if (auto problem = rangeProblem(c)) return problem;
  if (!c.logFile.empty()) {
    if (auto problem = collectives::logPatternProblem(c.logFile)) return problem;
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
    std::error_code error;
    if (!std::filesystem::is_directory(c.dataDir, error)) {
      const std::string prepare = c.model == ModelKind::kGpt
                                      ? "prepare a corpus with data/prepare_fortunes.sh --out "
                                      : "fetch MNIST with data/fetch_mnist.sh ";
      return "--data " + c.dataDir + ": no such folder (" + prepare + c.dataDir +
             ", or train on --synthetic data)";
    }
  }
  return std::nullopt;
}

namespace {

po::options_description benchOptions(BenchConfig& b, RawOptions& raw, std::string& standIn) {
  po::options_description bench("Benchmark");
  // clang-format off
  bench.add_options()
      ("profile", po::value(&b.profile)->default_value(b.profile), "resnet50 | resnet101 | vgg16 | bert-large | gpt2-124m (bench/profiles/NAME.txt), or a profile file: the gradient tensors whose exchange is measured")
      ("compute-ms", po::value(&b.computeMs)->default_value(b.computeMs, shortest(b.computeMs)), "a step's forward and backward per rank, stood in for layer by layer in proportion to their FLOPs")
      ("stand-in", po::value(&standIn)->default_value(standIn), choicesHelp(kStandInNames, "how the computation is stood in for: sleep leaves the core free (many ranks on few cores), spin keeps it busy").c_str())
      ("warmup-steps", po::value(&b.warmupSteps)->default_value(b.warmupSteps), "steps run before timing starts")
      ("chunks", po::value(&b.chunks)->default_value(b.chunks), "timed chunks of steps; the throughput's spread is over them")
      ("steps-per-chunk", po::value(&b.stepsPerChunk)->default_value(b.stepsPerChunk), "steps in each timed chunk")
      ("batch-size", po::value(&b.batchSize)->default_value(b.batchSize), "samples per rank per step, to report samples/s (0: steps/s only)")
      ("link-gbit", po::value(&b.linkGbit)->default_value(b.linkGbit), "the link's rate in Gbit/s for the analytic bound on the step (0: unshaped, the bound is the computation)")
      ("link-latency-us", po::value(&b.linkLatencyUs)->default_value(b.linkLatencyUs), "one message's latency in microseconds for the bound")
      ("json", po::value(&b.json), "rank 0 writes the results to this file as JSON");
  // clang-format on
  po::options_description engine("Gradient engine (as ringtrain train takes them)");
  addExchangeOptions(engine, b.engine, raw);
  bench.add(engine);
  return bench;
}

std::optional<std::string> validateBenchConfig(const BenchConfig& b) {
  if (!std::isfinite(b.computeMs) || b.computeMs < 0)
    return fmt::format("--compute-ms must be a finite number, at least 0 (got {})", b.computeMs);
  if (b.warmupSteps < 0) return "--warmup-steps must not be negative";
  if (b.chunks < 1) return "--chunks must be at least 1";
  if (b.stepsPerChunk < 1) return "--steps-per-chunk must be at least 1";
  if (b.batchSize < 0) return "--batch-size must not be negative (0: steps/s only)";
  if (!std::isfinite(b.linkGbit) || b.linkGbit < 0)
    return "--link-gbit must be a finite number, at least 0 (0: unshaped)";
  if (!std::isfinite(b.linkLatencyUs) || b.linkLatencyUs < 0)
    return "--link-latency-us must be a finite number, at least 0";
  if (!std::isfinite(b.engine.stallTimeoutSeconds) || b.engine.stallTimeoutSeconds < 0)
    return "--stall-timeout must be a finite number, at least 0 (0 means never)";
  if (b.engine.backend == engine::ExchangeBackend::kNccl)
    return "--backend nccl averages GPU buffers, and ringtrain bench averages host buffers: use "
           "mpi, ring, hierarchical, shm or auto";
  return deviceAndBackendProblem(b.engine);
}

}  // namespace

std::optional<std::string> parseBenchConfig(int argc, const char* const* argv, BenchConfig& b,
                                            bool& help, std::string& helpText) {
  RawOptions raw;
  std::string standIn = "sleep";
  const po::options_description options = benchOptions(b, raw, standIn);
  try {
    po::options_description everything;
    everything.add_options()("help,h", "print this help");
    everything.add(options);
    po::variables_map values;
    po::store(po::command_line_parser(argc, argv).options(everything).run(), values);
    if (values.count("help")) {
      help = true;
      helpText = "usage: mpirun -np N ringtrain bench [options]\n\n" + optionsText(everything);
      return std::nullopt;
    }
    po::notify(values);
  } catch (const po::error& e) {
    return std::string(e.what());
  }
  if (auto error = parseChoice("stand-in", standIn, kStandInNames, b.standIn)) return error;
  if (auto error = convertExchangeOptions(raw, b.engine)) return error;
  b.engine.device = Device::kCpu;
  return validateBenchConfig(b);
}

engine::ExchangeOptions exchangeOptions(const TrainConfig& c) {
  engine::ExchangeOptions options;
  options.fusionThresholdBytes = c.fusionThresholdBytes;
  options.overlap = c.overlap;
  options.compression = c.compression;
  options.stallTimeoutSeconds = c.stallTimeoutSeconds;
  options.tuningFile = c.tuningFile;
  options.test.stallRank = c.test.stallRank;
  options.test.stallCollective = c.test.stallCollective;
  options.test.stallSeconds = c.test.stallSeconds;
  return options;
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
  std::vector<std::pair<std::string, std::string>> options = {
      {"--model", std::string(nameIn(kModelNames, c.model))},
      {"--hidden", list(c.hidden)},
      {"--synthetic", c.synthetic ? "true" : "false"},
      {"--synthetic-shape", list(c.syntheticShape)},
      {"--synthetic-classes", std::to_string(c.syntheticClasses)},
      {"--synthetic-size", std::to_string(c.syntheticSize)},
      {"--drop-last", c.dropLast ? "true" : "false"},
      {"--epochs", std::to_string(c.epochs)},
      {"--steps", std::to_string(c.steps)},
      {"--batch-size", std::to_string(c.batchSize)},
      {"--accumulate-steps", std::to_string(c.accumulateSteps)},
      {"--seed", std::to_string(c.seed)},
      {"--eval-every", std::to_string(c.evalEvery)},
      {"--eval-samples", std::to_string(c.evalSamples)},
      {"--log-every", std::to_string(c.logEvery)},
      {"--optimizer", std::string(nameIn(kOptimizerNames, c.optimizer))},
      {"--lr", number(c.learningRate)},
      {"--momentum", number(c.momentum)},
      {"--nesterov", c.nesterov ? "true" : "false"},
      {"--weight-decay", number(c.weightDecay)},
      {"--beta1", number(c.beta1)},
      {"--beta2", number(c.beta2)},
      {"--epsilon", number(c.epsilon)},
      {"--lr-schedule", std::string(nameIn(kLrScheduleNames, c.lrSchedule))},
      {"--warmup-steps", std::to_string(c.warmupSteps)},
      {"--lr-step-size", std::to_string(c.lrStepSize)},
      {"--lr-gamma", number(c.lrGamma)},
      {"--clip-grad-norm", number(c.clipGradNorm)},
      {"--scale-lr", c.scaleLr ? "true" : "false"},
      {"--device", std::string(nameIn(kDeviceNames, c.device))},
      {"--tf32", c.tf32 ? "true" : "false"},
      {"--precision", std::string(nameIn(kPrecisionNames, c.precision))},
      {"--backend", std::string(name(c.backend))},
      {"--overlap", c.overlap ? "on" : "off"},
      {"--fusion-threshold", std::to_string(c.fusionThresholdBytes)},
      {"--compression", std::string(engine::name(c.compression))},
      {"--stall-timeout", number(c.stallTimeoutSeconds)},
      {"--check-finite", std::string(nameIn(kCheckFiniteNames, c.checkFinite))},
      // Every rank takes part in the per-step SIGTERM check, or none does.
      {"--sigterm-grace", number(c.sigtermGraceSeconds)},
  };
  if (c.model == ModelKind::kGpt) {  // only then: an MLP's config names no GPT option
    const std::pair<const char*, models::Index> sizes[] = {{"--layers", c.gpt.layers},
                                                           {"--heads", c.gpt.heads},
                                                           {"--width", c.gpt.width},
                                                           {"--context", c.gpt.context},
                                                           {"--vocab", c.gpt.vocabulary}};
    for (const auto& [option, value] : sizes)
      options.emplace_back(option, std::to_string(value));
  }
  return options;
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
  add("on-resize", std::string(nameIn(kOnResizeNames, c.onResize)));
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
    out << " precision " << nameIn(kPrecisionNames, c.precision);
  out << ", backend " << name(c.backend) << (c.overlap ? " overlap" : " no overlap") << " fusion "
      << (c.fusionThresholdBytes >> 10) << " KiB";
  if (c.compression != engine::Compression::kNone)
    out << " compression " << engine::name(c.compression);
  out << ", seed " << c.seed;
  return out.str();
}

}  // namespace ringtrain
