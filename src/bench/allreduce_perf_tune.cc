#include "src/bench/allreduce_perf_tune.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <string>
#include <vector>

#include <mpi.h>

#include "collectives/allreduce_tuner.h"

namespace ringtrain::allreduce_perf {
namespace {

using collectives::AllreduceAlgorithm;
using collectives::TunedSize;

void printTuneHeader(const std::vector<AllreduceAlgorithm>& algorithms) {
  std::cout << "#\n# tune: median us per call, in place (which decides) / out of place\n"
            << fmt::format("# {:>10}", "size (B)");
  for (const AllreduceAlgorithm algorithm : algorithms)
    std::cout << fmt::format(" {:>22}", name(algorithm));
  std::cout << fmt::format(" {:>18}\n", "chosen");
}

void printTuneRow(const TunedSize& size) {
  std::cout << fmt::format("{:>12}", size.bytes);
  for (std::size_t i = 0; i < size.inPlaceUs.size(); ++i) {
    const std::string cell =
        std::isinf(size.inPlaceUs[i])
            ? "-"
            : fmt::format("{:.2f} / {:.2f}", size.inPlaceUs[i], size.outOfPlaceUs[i]);
    std::cout << fmt::format(" {:>22}", cell);
  }
  std::cout << fmt::format(" {:>18}\n", name(size.chosen)) << std::flush;
}

// The size's row of the JSON's "tune": the times of the candidates that take it, and the choice.
nlohmann::json tuneRowJson(const TunedSize& size,
                           const std::vector<AllreduceAlgorithm>& algorithms) {
  nlohmann::json row{{"bytes", size.bytes}, {"chosen", name(size.chosen)}};
  for (std::size_t i = 0; i < algorithms.size(); ++i) {
    if (std::isinf(size.inPlaceUs[i])) continue;
    const std::string algorithm(name(algorithms[i]));
    row["in_place_us"][algorithm] = size.inPlaceUs[i];
    row["out_of_place_us"][algorithm] = size.outOfPlaceUs[i];
  }
  return row;
}

}  // namespace

std::uint64_t tune(const Bench& bench, const Case& c, nlohmann::json& json, bool root) {
  const Options& o = bench.options;
  const collectives::RankLayout layout =
      collectives::rankLayoutOf(MPI_COMM_WORLD, o.communicator.test.ranksPerNode);
  collectives::AllreduceTuner tuner(MPI_COMM_WORLD, o.communicator, layout,
                                    {.rounds = o.tuneRounds, .margin = o.tuneMargin});
  const std::vector<AllreduceAlgorithm> algorithms = tuner.algorithms();
  if (root) printTuneHeader(algorithms);
  std::uint64_t wrong = 0;
  for (const std::size_t size : sweepSizes(o)) {
    const std::size_t count = size / sizeOf(c.type);
    const auto time = [&](Communicator& comm, bool inPlace) {
      const Measurement m = measure(bench, comm, c, count, inPlace);
      wrong += static_cast<std::uint64_t>(std::max<std::int64_t>(m.wrong, 0));
      return m.timeUs;
    };
    const TunedSize tuned = tuner.tuneSize(count * sizeOf(c.type), time);
    if (root) printTuneRow(tuned);
    json["tune"].push_back(tuneRowJson(tuned, algorithms));
  }
  const collectives::TuningTable table = tuner.table();
  json["tuning_table"] = nlohmann::json::parse(tuningTableText(table));
  if (root) {
    writeTuningFile(o.tuneOut, table);
    std::cout << "# tune: wrote " << o.tuneOut << ": " << summary(table) << "\n";
  }
  return wrong;
}

}  // namespace ringtrain::allreduce_perf
