#include "training/model_memory.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <new>
#include <stdexcept>

#include "base/physical_memory.h"

namespace ringtrain::training {
namespace {

std::string joined(const std::vector<int>& values) {
  return fmt::format("{}", fmt::join(values, ","));
}

}  // namespace

std::uint64_t bytesPerParameter(const TrainConfig& config) {
  const std::uint64_t state = config.optimizer == OptimizerKind::kSgd ? 1 : 2;
  return (3 + state) * sizeof(float);
}

std::string modelOptions(const TrainConfig& config, const models::ModelSpec& spec) {
  if (config.model == ModelKind::kMlp) return "--model mlp --hidden " + joined(config.hidden);
  return fmt::format("--model {} on {} samples", spec.name, models::toString(spec.input));
}

std::optional<std::string> modelMemoryProblem(const TrainConfig& config,
                                              const models::ModelSpec& spec, int ranksOnNode,
                                              std::uint64_t physicalBytes) {
  const double parameters = models::parameterCount(spec);
  const double perRank = parameters * static_cast<double>(bytesPerParameter(config));
  const double needed = perRank * ranksOnNode;
  if (physicalBytes == 0 || needed <= static_cast<double>(physicalBytes)) return std::nullopt;
  return fmt::format(
      "{}: {:.4g} parameters need {:.1f} GiB per rank ({} bytes each: parameters, gradients, "
      "averaged gradients, optimiser state), {} rank(s) on this node, but the machine has "
      "{:.1f} GiB of memory",
      modelOptions(config, spec), parameters, gibibytes(perRank), bytesPerParameter(config),
      ranksOnNode, gibibytes(static_cast<double>(physicalBytes)));
}

models::Model<float> allocateModel(const TrainConfig& config, const models::ModelSpec& spec) {
  try {
    return models::makeModel<float>(spec);
  } catch (const std::bad_alloc&) {
    throw std::runtime_error(fmt::format(
        "{}: allocating the model's {:.4g} parameters ({:.1f} GiB) failed (std::bad_alloc)",
        modelOptions(config, spec), models::parameterCount(spec),
        gibibytes(models::parameterCount(spec) * sizeof(float))));
  }
}

}  // namespace ringtrain::training
