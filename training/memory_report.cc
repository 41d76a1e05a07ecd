#include "training/memory_report.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/resource.h>

#include <algorithm>
#include <array>

namespace ringtrain::training {
namespace {

// Every figure of an account: its words in the line, its tag in metrics.jsonl.
struct Figure {
  const char* words;
  const char* tag;
  std::int64_t MemoryAccount::*field;
};
constexpr std::array<Figure, 7> kFigures = {{
    {"parameters", "parameters_bytes", &MemoryAccount::parameters},
    {"gradients", "gradients_bytes", &MemoryAccount::gradients},
    {"averaged gradients", "averaged_gradients_bytes", &MemoryAccount::averagedGradients},
    {"optimiser state", "optimizer_state_bytes", &MemoryAccount::optimizerState},
    {"activations", "activations_bytes", &MemoryAccount::activations},
    {"communication buffers", "communication_buffers_bytes", &MemoryAccount::communicationBuffers},
    {"peak resident", "peak_resident_bytes", &MemoryAccount::peakResident},
}};
constexpr std::size_t kParts = kFigures.size() - 1;  // the last figure is the peak

double mebibytes(std::int64_t bytes) {
  return static_cast<double>(bytes) / (1024.0 * 1024.0);
}

std::int64_t largest(std::span<const MemoryAccount> perRank, std::int64_t MemoryAccount::*field) {
  std::int64_t most = 0;
  for (const MemoryAccount& account : perRank)
    most = std::max(most, account.*field);
  return most;
}

}  // namespace

std::int64_t peakResidentBytes() {
  rusage usage{};
  if (::getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  return static_cast<std::int64_t>(usage.ru_maxrss) * 1024;  // Linux counts KiB
}

MemoryAccount accountMemory(const models::Model<float>& model, Optimizer& optimizer,
                            const engine::StepBuffers& buffers,
                            const engine::GradientExchange& exchange) {
  MemoryAccount a;
  a.parameters = static_cast<std::int64_t>(model.parameters().size_bytes());
  a.gradients = static_cast<std::int64_t>(model.gradientBytes());
  if (buffers.averaged.data() != buffers.gradients.data())
    a.averagedGradients = static_cast<std::int64_t>(buffers.averaged.size_bytes());
  for (const std::span<float> state : optimizer.state())
    a.optimizerState += static_cast<std::int64_t>(state.size_bytes());
  a.activations = static_cast<std::int64_t>(model.activationBytes());
  a.communicationBuffers = static_cast<std::int64_t>(exchange.bufferBytes());
  a.peakResident = peakResidentBytes();
  return a;
}

std::vector<MemoryAccount> gatherMemory(collectives::Communicator& comm,
                                        const MemoryAccount& mine) {
  std::array<std::int64_t, kFigures.size()> packed{};
  for (std::size_t i = 0; i < kFigures.size(); ++i)
    packed[i] = mine.*kFigures[i].field;
  std::vector<std::int64_t> all(packed.size() * static_cast<std::size_t>(comm.size()));
  comm.allgather(packed.data(), all.data(), packed.size(), collectives::DataType::kInt64);
  std::vector<MemoryAccount> perRank(static_cast<std::size_t>(comm.size()));
  for (std::size_t r = 0; r < perRank.size(); ++r) {
    for (std::size_t i = 0; i < kFigures.size(); ++i)
      perRank[r].*kFigures[i].field = all[r * packed.size() + i];
  }
  return perRank;
}

std::string memoryLine(std::span<const MemoryAccount> perRank) {
  if (perRank.empty()) return "";
  std::vector<std::string> parts;
  for (std::size_t i = 0; i < kParts; ++i) {
    parts.push_back(fmt::format("{} {:.1f}", kFigures[i].words,
                                mebibytes(largest(perRank, kFigures[i].field))));
  }
  std::int64_t accounted = 0;
  std::vector<std::string> peaks;
  for (const MemoryAccount& account : perRank) {
    accounted = std::max(accounted, account.accounted());
    peaks.push_back(fmt::format("{:.1f}", mebibytes(account.peakResident)));
  }
  return fmt::format(
      "memory per rank, MiB (the largest of the ranks): {}; accounted {:.1f}; peak resident "
      "{:.1f} (by rank: {})",
      fmt::join(parts, ", "), mebibytes(accounted),
      mebibytes(largest(perRank, &MemoryAccount::peakResident)), fmt::join(peaks, ", "));
}

void logMemory(storage::TrainingLog& log, std::int64_t step,
               std::span<const MemoryAccount> perRank) {
  std::vector<storage::Scalar> scalars;
  for (const Figure& figure : kFigures)
    scalars.push_back({figure.tag, static_cast<double>(largest(perRank, figure.field))});
  std::int64_t smallestPeak = largest(perRank, &MemoryAccount::peakResident);
  for (const MemoryAccount& account : perRank)
    smallestPeak = std::min(smallestPeak, account.peakResident);
  scalars.push_back({"peak_resident_bytes_min", static_cast<double>(smallestPeak)});
  log.write("memory", step, scalars);
}

}  // namespace ringtrain::training
