#include "src/commands/generation.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <numeric>
#include <regex>
#include <stdexcept>
#include <vector>

#include "base/exit_status.h"
#include "data/bpe_tokenizer.h"
#include "src/commands/subcommand.h"

namespace ringtrain::commands {
namespace {

constexpr std::int32_t kEndOfText = 50256;  // GPT-2's <|endoftext|>

// The name is a C string: g++ 13 takes a reference returned beside a temporary std::string for a
// dangling one (-Wdangling-reference).
const storage::Tensor& tensorNamed(const storage::CheckpointContent& saved, const char* name,
                                   const std::filesystem::path& file) {
  for (const storage::Tensor& tensor : saved.parameters)
    if (tensor.name == name) return tensor;
  throw std::runtime_error(file.string() + ": no tensor " + name + " (not a GPT checkpoint?)");
}

// "heads = 4" in the saved configuration lines.
models::Index savedHeads(const std::string& config, const std::filesystem::path& file) {
  std::smatch match;
  static const std::regex line(R"((^|\n)heads = (\d+)(\n|$))");
  if (!std::regex_search(config, match, line))
    throw std::runtime_error(file.string() + ": its configuration does not say the heads");
  return std::stoll(match[2].str());
}

models::Model<float> loadModel(const training::GenerationOptions& options) {
  const storage::ResumePlan plan = checkpointToRead(options.checkpoint);
  const storage::CheckpointContent& saved = plan.content;
  models::ModelSpec spec;
  spec.name = "gpt";
  spec.gpt = gptShapeOf(saved, options.checkpoint);
  spec.input = {1, spec.gpt.context, 1};
  models::Model<float> model = models::makeModel<float>(spec);
  for (const storage::Tensor& tensor : saved.parameters) {
    const models::ParameterEntry& entry = model.parameter(tensor.name);
    if (entry.count != tensor.values.size())
      throw std::runtime_error(options.checkpoint.string() + ": " + tensor.name + " has " +
                               std::to_string(tensor.values.size()) + " values, the model " +
                               std::to_string(entry.count));
    std::copy(tensor.values.begin(), tensor.values.end(),
              model.parameters().begin() + static_cast<std::ptrdiff_t>(entry.offset));
  }
  model.reserve(1);
  return model;
}

// Appends up to `count` tokens drawn from the model to `tokens`, stopping at <|endoftext|>.
void extend(models::Model<float>& model, std::vector<std::int32_t>& tokens, int count,
            const training::GenerationOptions& options, models::SplitMix64& generator) {
  const models::Index context = model.inputShape().height;
  const models::Index vocabulary = model.outputSize() / context;
  std::vector<float> window(static_cast<std::size_t>(context));
  for (int n = 0; n < count; ++n) {
    const auto length = std::min<std::size_t>(tokens.size(), static_cast<std::size_t>(context));
    std::fill(window.begin(), window.end(), 0.0f);  // positions after `length` are not read
    std::transform(tokens.end() - static_cast<std::ptrdiff_t>(length), tokens.end(), window.begin(),
                   [](std::int32_t id) { return static_cast<float>(id); });
    const auto outputs = model.infer(window);
    const float* last = outputs.data() + (static_cast<models::Index>(length) - 1) * vocabulary;
    const std::int32_t next = sampleToken({last, static_cast<std::size_t>(vocabulary)},
                                          options.temperature, options.topK, generator);
    if (next == kEndOfText) return;  // the text is complete
    tokens.push_back(next);
  }
}

}  // namespace

models::GptShape gptShapeOf(const storage::CheckpointContent& saved,
                            const std::filesystem::path& file) {
  const storage::Tensor& wte = tensorNamed(saved, "wte.weight", file);
  const storage::Tensor& wpe = tensorNamed(saved, "wpe.weight", file);
  models::GptShape shape;
  shape.vocabulary = wte.shape.at(0);
  shape.width = wte.shape.at(1);
  shape.context = wpe.shape.at(0);
  shape.layers =
      std::count_if(saved.parameters.begin(), saved.parameters.end(), [](const storage::Tensor& t) {
        return t.name.starts_with("h.") && t.name.ends_with(".ln_1.weight");
      });
  shape.heads = savedHeads(saved.config, file);
  return shape;
}

std::int32_t sampleToken(std::span<const float> logits, double temperature, int topK,
                         models::SplitMix64& generator) {
  std::vector<std::int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  const auto byLogit = [&](std::int32_t a, std::int32_t b) { return logits[a] > logits[b]; };
  if (temperature == 0) return *std::min_element(order.begin(), order.end(), byLogit);
  const std::size_t k =
      topK > 0 ? std::min<std::size_t>(static_cast<std::size_t>(topK), order.size()) : order.size();
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
                    byLogit);
  std::vector<double> weights(k);
  const double top = logits[static_cast<std::size_t>(order[0])];
  for (std::size_t i = 0; i < k; ++i)
    weights[i] = std::exp((logits[static_cast<std::size_t>(order[i])] - top) / temperature);
  const double total = std::accumulate(weights.begin(), weights.end(), 0.0);
  double draw = (generator.symmetric(0.5) + 0.5) * total;
  for (std::size_t i = 0; i < k; ++i) {
    draw -= weights[i];
    if (draw < 0) return order[i];
  }
  return order[k - 1];
}

int generateCommand(int argc, char** argv) {
  training::GenerationOptions options;
  bool help = false;
  try {
    std::string helpText;
    // argv[1] is "generate": the options start after it.
    if (const auto problem =
            training::parseGenerateConfig(argc - 1, argv + 1, options, help, helpText)) {
      std::cerr << "ringtrain generate: " << *problem << "\n";
      return kExitBadInput;
    }
    if (help) {
      std::cout << helpText;
      return kExitOk;
    }
    const data::BpeTokenizer tokenizer = data::BpeTokenizer::loadFolder(options.vocabulary);
    models::Model<float> model = loadModel(options);
    models::SplitMix64 generator(options.seed);
    for (int s = 0; s < options.samples; ++s) {
      std::vector<std::int32_t> tokens = tokenizer.encode(options.prompt);
      if (tokens.empty()) tokens.push_back(kEndOfText);
      const auto context = static_cast<std::size_t>(model.inputShape().height);
      if (s == 0 && tokens.size() > context) {
        std::cerr << "ringtrain generate: the prompt is " << tokens.size()
                  << " tokens, the model's context " << context << ": it continues from the last "
                  << context << "\n";
      }
      const std::size_t promptLength = options.prompt.empty() ? 1 : tokens.size();
      extend(model, tokens, options.tokens, options, generator);
      const std::span<const std::int32_t> text(tokens);
      std::cout << (options.prompt.empty() ? "" : options.prompt)
                << tokenizer.decode(text.subspan(promptLength)) << "\n";
      if (s + 1 < options.samples) std::cout << "---\n";
    }
  } catch (const std::exception& e) {
    std::cerr << "ringtrain generate: " << e.what() << "\n";
    return kExitBadInput;
  }
  return kExitOk;
}

}  // namespace ringtrain::commands
