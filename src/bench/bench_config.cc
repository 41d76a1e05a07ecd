#include "src/bench/bench_config.h"

#include "options/exchange_settings.h"
#include "options/option_table.h"

namespace ringtrain::bench {
namespace {

constexpr auto kCompared = options::Agreement::kCompared;
constexpr auto kPerRank = options::Agreement::kPerRank;
using options::with;

// The benchmark's own options.
options::Table<BenchConfig> benchmarkOptions() {
  const std::string group = "Benchmark";
  // clang-format off
  return {
      with(options::text<BenchConfig>("profile", RINGTRAIN_FIELD(profile), "resnet50 | resnet101 | vgg16 | bert-large | gpt2-124m (bench/profiles/NAME.txt), or a profile file: the gradient tensors whose exchange is measured"), group, kCompared),
      with(options::number<BenchConfig>("compute-ms", RINGTRAIN_FIELD(computeMs), {.min = 0, .rule = "must be a finite number, at least 0"}, "a step's forward and backward per rank, stood in for layer by layer in proportion to their FLOPs"), group, kCompared),
      // How the rank's own core is kept while standing in: no collective depends on it.
      with(options::choice<BenchConfig>("stand-in", RINGTRAIN_FIELD(standIn), kStandInNames, "how the computation is stood in for: sleep leaves the core free (many ranks on few cores), spin keeps it busy"), group, kPerRank),
      with(options::number<BenchConfig>("warmup-steps", RINGTRAIN_FIELD(warmupSteps), options::kNotNegative, "steps run before timing starts"), group, kCompared),
      with(options::number<BenchConfig>("chunks", RINGTRAIN_FIELD(chunks), options::kPositive, "timed chunks of steps; the throughput's spread is over them"), group, kCompared),
      with(options::number<BenchConfig>("steps-per-chunk", RINGTRAIN_FIELD(stepsPerChunk), options::kPositive, "steps in each timed chunk"), group, kCompared),
      with(options::number<BenchConfig>("batch-size", RINGTRAIN_FIELD(batchSize), {.min = 0, .hint = " (0: steps/s only)"}, "samples per rank per step, to report samples/s (0: steps/s only)"), group, kCompared),
      // Rank 0 computes the analytic bound and writes the JSON.
      with(options::number<BenchConfig>("link-gbit", RINGTRAIN_FIELD(linkGbit), {.min = 0, .hint = " (0: unshaped)", .rule = "must be a finite number, at least 0"}, "the link's rate in Gbit/s for the analytic bound on the step (0: unshaped, the bound is the computation)"), group, kPerRank),
      with(options::number<BenchConfig>("link-latency-us", RINGTRAIN_FIELD(linkLatencyUs), {.min = 0, .rule = "must be a finite number, at least 0"}, "one message's latency in microseconds for the bound"), group, kPerRank),
      with(options::text<BenchConfig>("json", RINGTRAIN_FIELD(json), "rank 0 writes the results to this file as JSON"), group, kPerRank),
  };
  // clang-format on
}

// The gradient engine's options as `ringtrain train` takes them, but --backend without nccl (the
// benchmark averages host buffers) and nothing saved (no checkpoint).
options::Table<BenchConfig> engineOptions() {
  options::Table<BenchConfig> rows =
      options::exchangeOptionRows<BenchConfig>("Gradient engine (as ringtrain train takes them)");
  for (options::Option<BenchConfig>& row : rows) {
    row.saved = false;
    if (row.name == "backend")
      row.help =
          "auto | mpi | ring | tuned | hierarchical | shm: how gradients are averaged (host "
          "buffers; nccl is for ringtrain train --device cuda); auto: shm where every rank shares "
          "one node, tuned across nodes";
  }
  return rows;
}

std::optional<std::string> validate(const BenchConfig& b) {
  if (auto problem = options::checkRanges(benchOptionTable(), b)) return problem;
  if (b.exchange.backend == engine::ExchangeBackend::kNccl)
    return "--backend nccl averages GPU buffers, and ringtrain bench averages host buffers: use "
           "mpi, ring, tuned, hierarchical, shm or auto";
  return options::compressionProblem(b.exchange.backend, b.exchange.compression);
}

}  // namespace

const options::Table<BenchConfig>& benchOptionTable() {
  static const options::Table<BenchConfig> table = [] {
    options::Table<BenchConfig> all = benchmarkOptions();
    for (auto&& row : engineOptions())
      all.push_back(std::move(row));
    return all;
  }();
  return table;
}

std::optional<std::string> parseBenchConfig(int argc, const char* const* argv, BenchConfig& b,
                                            bool& help, std::string& helpText) {
  const options::Program program{"bench", "usage: mpirun -np N ringtrain bench [options]"};
  options::Outcome outcome;
  auto error = options::parse(program, benchOptionTable(), argc, argv, b, outcome);
  help = outcome.help;
  helpText = outcome.helpText;
  b.parseWarnings = outcome.warnings;
  if (error || help) return error;
  return validate(b);
}

std::vector<std::pair<std::string, std::string>> comparableOptions(const BenchConfig& b) {
  return options::comparedItems(benchOptionTable(), b);
}

}  // namespace ringtrain::bench
