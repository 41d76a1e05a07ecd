#include "src/commands/eval_command.h"

#include <fmt/format.h>
#include <unistd.h>  // getpid

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/exit_status.h"
#include "collectives/communicator.h"
#include "models/flush_to_zero.h"
#include "models/matrix_products.h"
#include "options/option_table.h"
#include "options/startup_errors.h"
#include "src/commands/subcommand.h"
#include "storage/checkpoint_model.h"
#include "storage/safetensors.h"
#include "training/config.h"
#include "training/data_sources.h"
#include "training/evaluation.h"
#include "training/exported_weights.h"
#include "training/model_memory.h"
#include "training/trainer.h"

namespace ringtrain::commands {
namespace {

// What `eval` itself takes; every other option is a `ringtrain train` option.
struct EvalRequest {
  std::string checkpoint;  // a checkpoint file or folder
  std::string initFrom;    // a safetensors file
  std::string json;        // rank 0 writes the figures here ("" : none)
  std::vector<std::string> trainOptions;
  std::vector<std::string> parseWarnings;
};

// The weights to evaluate, read on every rank.
struct SavedWeights {
  std::filesystem::path file;
  std::int64_t step = -1;            // -1: not known (a safetensors file from elsewhere)
  std::string config;                // the saved configuration lines ("" : none)
  storage::CheckpointContent saved;  // a checkpoint's content (empty for a safetensors file)
};

const options::Table<EvalRequest>& evalOptionTable() {
  const std::string group = "ringtrain eval: the test-set loss and accuracy of weights";
  constexpr auto kPerRank = options::Agreement::kPerRank;  // eval compares no option
  using options::with;
  // clang-format off
  static const options::Table<EvalRequest> table = {
      with(options::text<EvalRequest>("checkpoint", RINGTRAIN_FIELD(checkpoint), "a checkpoint (ckpt-<step>.h5), or a folder of them (its newest good one)"), group, kPerRank),
      with(options::text<EvalRequest>("init-from", RINGTRAIN_FIELD(initFrom), "a safetensors file (ringtrain export, or Hugging Face's GPT-2)"), group, kPerRank),
      with(options::text<EvalRequest>("json", RINGTRAIN_FIELD(json), "rank 0 also writes the figures to this JSON file"), group, kPerRank),
  };
  // clang-format on
  return table;
}

// Every option eval does not name, --config among them, goes on to train's table.
const options::Program kEvalProgram{
    "eval",
    "usage: ringtrain eval --checkpoint FILE|FOLDER | --init-from FILE [options]\n"
    "Any `ringtrain train` option (--data, --batch-size, --model, --synthetic, ...) overrides the\n"
    "configuration saved with the weights; --config FILE replaces it.",
    true};

std::optional<std::string> parseRequest(int argc, char** argv, EvalRequest& r, bool& help,
                                        std::string& helpText) {
  options::Outcome outcome;
  auto error = options::parse(kEvalProgram, evalOptionTable(), argc, argv, r, outcome);
  help = outcome.help;
  helpText = outcome.helpText;
  r.trainOptions = outcome.rest;
  r.parseWarnings = outcome.warnings;
  if (error || help) return error;
  if (r.checkpoint.empty() == r.initFrom.empty())
    return "give one of --checkpoint FILE|FOLDER and --init-from FILE (the weights to evaluate)";
  return std::nullopt;
}

SavedWeights readWeights(const EvalRequest& r) {
  SavedWeights weights;
  if (!r.checkpoint.empty()) {
    storage::ResumePlan plan = checkpointToRead(r.checkpoint);
    weights.file = plan.path;
    weights.step = plan.content.step;
    weights.config = plan.content.config;
    weights.saved = std::move(plan.content);
    return weights;
  }
  weights.file = r.initFrom;
  const storage::SafetensorsContent content = storage::readSafetensors(r.initFrom);
  if (const auto config = content.metadata.find("ringtrain_config");
      config != content.metadata.end())
    weights.config = config->second;
  if (const auto step = content.metadata.find("ringtrain_step"); step != content.metadata.end())
    weights.step = std::stoll(step->second);
  return weights;
}

bool givesConfigFile(const std::vector<std::string>& options) {
  return std::any_of(options.begin(), options.end(), [](const std::string& option) {
    return option == "--config" || option.starts_with("--config=");
  });
}

// The training configuration to evaluate with: the saved lines (through a --config file of this
// process's own), then the command line's train options over them.
std::optional<std::string> settleConfig(const SavedWeights& weights, const EvalRequest& r,
                                        training::TrainConfig& config) {
  std::vector<std::string> args = {"eval"};
  std::filesystem::path savedFile;
  if (!weights.config.empty() && !givesConfigFile(r.trainOptions)) {
    savedFile =
        std::filesystem::temp_directory_path() / fmt::format("ringtrain-eval-{}.conf", ::getpid());
    std::ofstream(savedFile) << weights.config;
    args.insert(args.end(), {"--config", savedFile.string()});
  }
  args.insert(args.end(), r.trainOptions.begin(), r.trainOptions.end());
  std::vector<const char*> argv;
  for (const std::string& arg : args)
    argv.push_back(arg.c_str());
  bool help = false;
  std::string helpText;
  std::optional<std::string> error = training::parseTrainConfig(
      static_cast<int>(argv.size()), argv.data(), config, help, helpText);
  if (!savedFile.empty()) std::filesystem::remove(savedFile);
  config.device = training::Device::kCpu;
  return error;
}

// The model of `config` for `data`, with the weights in it; throws a one-line error when they
// do not fit (another model, other sizes).
models::Model<float> loadedModel(const training::TrainConfig& config,
                                 const training::BatchSource& data, const SavedWeights& weights) {
  if (config.precision == models::Precision::kBfloat16 && !models::bf16ProductsSupported())
    throw std::runtime_error(
        "--precision bf16 needs a CPU with AVX512-BF16 instructions: add --precision fp32");
  models::setMatrixPrecision(config.precision);
  models::Model<float> model =
      training::allocateModel(config, training::modelSpecFor(config, data));
  if (weights.saved.parameters.empty()) {
    training::loadWeightsFile(weights.file, model);
  } else {
    storage::copyTensorsToFlat(weights.saved.parameters, model.parameterTable(), model.parameters(),
                               weights.file);
  }
  model.reserve(config.batchSize);  // the training run's chunks, for the same sums
  return model;
}

nlohmann::json figures(const models::BatchResult& result, training::EvaluationKind kind,
                       const SavedWeights& weights, int ranks) {
  nlohmann::json json;
  json["weights"] = weights.file.string();
  json["step"] = weights.step >= 0 ? nlohmann::json(weights.step) : nlohmann::json();
  json["ranks"] = ranks;
  json["samples"] = result.samples;
  json["loss"] = result.meanLoss();
  if (kind != training::EvaluationKind::kRegression) json["accuracy"] = result.accuracy();
  if (kind == training::EvaluationKind::kLanguageModel)
    json["perplexity"] = std::exp(result.meanLoss());
  return json;
}

}  // namespace

std::vector<options::Spec> evalOptionSpecs() {
  return options::specsOf(evalOptionTable());
}

int evalCommand(int argc, char** argv, collectives::MpiEnvironment& env) {
  const std::optional<EvalRequest> request = options::parseOnEveryRank<EvalRequest>(
      [&](EvalRequest& r, bool& help, std::string& helpText) {
        return parseRequest(argc, argv, r, help, helpText);
      },
      env.worldRank());
  if (!request) return kExitOk;  // --help
  options::warnOnRankZero(request->parseWarnings, env.worldRank());
  models::enableFlushToZero();  // as training computes
  models::keepMatrixProductsOnOneThread();
  std::optional<std::string> error;
  SavedWeights weights;
  training::TrainConfig config;
  training::Sources sources;
  std::optional<models::Model<float>> model;
  try {
    weights = readWeights(*request);
    error = settleConfig(weights, *request, config);
    if (!error) {
      sources = training::loadData(config);
      model.emplace(loadedModel(config, *sources.train, weights));
    }
    // An unwritable --json is bad input too, found before the evaluation.
    if (!error && env.worldRank() == 0 && !request->json.empty() &&
        !std::ofstream(request->json, std::ios::app))
      error = "--json " + request->json + ": cannot be written";
  } catch (const std::exception& e) {
    error = e.what();
  }
  options::exitEverywhereOnError(error);
  const auto comm = collectives::makeCommunicator(collectives::Backend::kMpi, env.world());
  const models::BatchResult result = training::evaluateTestSet(
      *sources.test, sources.test->size(), config.batchSize, *comm,
      [&](const models::Batch<float>& view) { return model->evaluate(view); });
  if (env.worldRank() != 0) return kExitOk;
  const training::EvaluationKind kind = training::evaluationKind(
      config.model == training::ModelKind::kGpt ? config.gpt.context : 0, *sources.train);
  std::cout << fmt::format("ringtrain eval: {} on {} rank(s); test: {}\n", weights.file.string(),
                           env.worldSize(), sources.test->describe())
            << training::evaluationLine(result, kind, weights.step, -1) << "\n";
  if (!request->json.empty())
    std::ofstream(request->json) << figures(result, kind, weights, env.worldSize()).dump(2) << "\n";
  return kExitOk;
}

}  // namespace ringtrain::commands
