#include "options/exchange_settings.h"

#include <fmt/format.h>

#include <stdexcept>

#include "collectives/allreduce_tuning.h"

namespace ringtrain::options {

const std::vector<NamedValue<std::optional<engine::ExchangeBackend>>>& backendChoices() {
  static const auto choices = [] {
    std::vector<NamedValue<std::optional<engine::ExchangeBackend>>> all = {{std::nullopt, "auto"}};
    for (const auto& entry : engine::kExchangeBackendNames)
      all.push_back({entry.value, entry.name});
    return all;
  }();
  return choices;
}

std::string_view name(const std::optional<engine::ExchangeBackend>& backend) {
  return backend ? engine::name(*backend) : "auto";
}

std::optional<std::string> compressionProblem(std::optional<engine::ExchangeBackend> backend,
                                              engine::Compression compression) {
  if (compression == engine::Compression::kNone || backend != engine::ExchangeBackend::kShm)
    return std::nullopt;
  return "--compression " + std::string(engine::name(compression)) +
         " makes gradient messages smaller, and --backend shm sends none: use ring, mpi or "
         "hierarchical with it";
}

std::optional<std::string> placementProblem(std::optional<engine::ExchangeBackend> backend,
                                            int ranks, int nodes) {
  if (backend != engine::ExchangeBackend::kShm || nodes <= 1) return std::nullopt;
  return fmt::format(
      "--backend shm needs every rank on one node, but the {} ranks are on {} nodes: use "
      "--backend ring, hierarchical or auto across nodes",
      ranks, nodes);
}

std::optional<std::string> settleTuningFile(std::string& tuningFile,
                                            std::optional<engine::ExchangeBackend> backend,
                                            MPI_Comm comm) {
  if (tuningFile.empty() || backend != engine::ExchangeBackend::kTuned) return std::nullopt;
  const collectives::RankLayout layout = collectives::rankLayoutOf(comm, 0);
  try {
    if (collectives::agreedTuningTable(comm, layout, tuningFile) ==
        collectives::builtinTuningTable(layout))
      tuningFile.clear();
  } catch (const std::invalid_argument& e) {
    return "--tuning-file: " + std::string(e.what());
  }
  return std::nullopt;
}

}  // namespace ringtrain::options
