#include "src/bench/profile_bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <thread>

#include "base/physical_memory.h"
#include "collectives/mpi_check.h"
#include "collectives/stall_watchdog.h"
#include "engine/exchange_factory.h"
#include "options/consistency_check.h"
#include "options/exchange_settings.h"
#include "options/startup_errors.h"

namespace ringtrain::bench {
namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

void waitUntil(Clock::time_point deadline, StandIn how) {
  if (how == StandIn::kSleep) {
    std::this_thread::sleep_until(deadline);
    return;
  }
  while (Clock::now() < deadline) {
  }
}

// One step as rank 0 saw it.
struct StepSample {
  double seconds = 0;
  double waitSeconds = 0;    // finishStep's wait for averaging: communication not hidden
  double reduceSeconds = 0;  // the averaging in all
};

// The stand-in keeps to deadlines counted from the step's start, so that a late wake-up is made
// up by the next layers rather than added to the step.
StepSample runStep(engine::GradientExchange& exchange, const engine::StepBuffers& buffers,
                   const StandInPlan& plan, StandIn how) {
  const auto asDuration = [](double seconds) {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  };
  const Clock::time_point start = Clock::now();
  exchange.beginStep(buffers);
  Clock::time_point deadline = start + asDuration(plan.forwardSeconds);
  waitUntil(deadline, how);
  const int last = static_cast<int>(plan.backwardSeconds.size()) - 1;
  for (int i = 0; i <= last; ++i) {
    deadline += asDuration(plan.backwardSeconds[static_cast<std::size_t>(i)]);
    waitUntil(deadline, how);
    exchange.segmentReady(last - i);  // segments are numbered in forward order
  }
  exchange.finishStep([](const engine::GradientBucket&) {});
  return {secondsSince(start), exchange.lastWaitSeconds(), exchange.lastReduceSeconds()};
}

// The tensors in the buffer's (forward) order, one segment each.
std::vector<engine::GradientSegment> segmentsOf(const GradientProfile& profile) {
  std::vector<engine::GradientSegment> segments;
  std::size_t offset = 0;
  for (auto t = profile.tensors.rbegin(); t != profile.tensors.rend(); ++t) {
    const auto count = static_cast<std::size_t>(t->count());
    segments.push_back({t->name, offset, count});
    offset += count;
  }
  return segments;
}

// The options with --backend auto settled, the same on every rank; nullopt after --help.
std::optional<BenchConfig> settledConfig(int argc, char** argv, collectives::MpiEnvironment& env) {
  std::optional<BenchConfig> parsed = options::parseOnEveryRank<BenchConfig>(
      [&](BenchConfig& config, bool& help, std::string& helpText) {
        return parseBenchConfig(argc, argv, config, help, helpText);
      },
      env.worldRank());
  if (!parsed) return std::nullopt;  // --help
  BenchConfig& config = *parsed;
  options::warnOnRankZero(config.parseWarnings, env.worldRank());
  options::exitEverywhereOnError(options::findDisagreement(env.world(), comparableOptions(config)));
  options::exitEverywhereOnError(
      options::placementProblem(config.exchange.backend, env.worldSize(), env.nodeCount()));
  const bool sharedNode = env.worldSize() > 1 && env.nodeCount() == 1;
  config.exchange.backend = config.exchange.backend.value_or(
      engine::autoHostBackend(config.exchange.compression, sharedNode));
  options::exitEverywhereOnError(
      options::settleTuningFile(config.exchange.tuningFile, config.exchange.backend, env.world()));
  std::optional<std::string> error;
  // Rank 0 writes --json at the end: a folder that is not there stops the job now, not then.
  const std::filesystem::path folder = std::filesystem::path(config.json).parent_path();
  std::error_code ec;
  if (env.worldRank() == 0 && !config.json.empty() && !folder.empty() &&
      !std::filesystem::is_directory(folder, ec))
    error = "--json " + config.json + ": no such folder " + folder.string();
  options::exitEverywhereOnError(error);
  return config;
}

// The profile, read on every rank; a bad one, or one whose gradients and averages (float32) the
// node's ranks cannot hold, ends the job on every rank.
GradientProfile loadProfile(const BenchConfig& config, const std::filesystem::path& program,
                            int ranksOnNode) {
  std::optional<std::string> error;
  GradientProfile profile;
  try {
    profile = readProfile(
        profileFile(config.profile, profileFolder(program, std::getenv(kProfileDirVariable))));
    const double perRank = static_cast<double>(profile.parameters()) * 2 * sizeof(float);
    const std::uint64_t physical = physicalMemoryBytes();
    if (physical > 0 && perRank * ranksOnNode > static_cast<double>(physical)) {
      error = fmt::format(
          "--profile {}: {} parameters need {:.1f} GiB per rank (gradients and their averages), "
          "{} rank(s) on this node, but the machine has {:.1f} GiB of memory",
          config.profile, profile.parameters(), gibibytes(perRank), ranksOnNode,
          gibibytes(static_cast<double>(physical)));
    }
  } catch (const std::exception& e) {
    error = e.what();
  }
  options::exitEverywhereOnError(error);
  return profile;
}

// The exchange of the settled backend, one segment per tensor. Every rank throws alike for a
// combination the backend cannot do (shm across nodes), which ends the job on every rank.
std::unique_ptr<engine::GradientExchange> makeExchange(const BenchConfig& config,
                                                       const GradientProfile& profile,
                                                       const collectives::MpiEnvironment& env) {
  std::unique_ptr<engine::GradientExchange> exchange;
  std::optional<std::string> error;
  try {
    exchange =
        engine::makeGradientExchange(*config.exchange.backend, env.world(), segmentsOf(profile),
                                     engine::exchangeOptionsOf(config.exchange));
  } catch (const std::invalid_argument& e) {
    error = e.what();
  }
  options::exitEverywhereOnError(error);
  return exchange;
}

struct Measurements {
  std::vector<StepSample> steps;     // the timed steps
  std::vector<double> chunkSeconds;  // each chunk's steps
};

Measurements measure(const BenchConfig& config, const GradientProfile& profile,
                     engine::GradientExchange& exchange, std::vector<float>& gradients,
                     MPI_Comm comm) {
  const engine::StepBuffers buffers = exchange.hostBuffers(gradients);
  std::fill(buffers.gradients.begin(), buffers.gradients.end(), 1.0f);
  const StandInPlan plan = planStandIn(profile, config.computeMs);
  for (std::int64_t i = 0; i < config.warmupSteps; ++i)
    runStep(exchange, buffers, plan, config.standIn);
  RINGTRAIN_MPI_CHECK(MPI_Barrier(comm));  // the timed chunks start together
  Measurements m;
  for (int c = 0; c < config.chunks; ++c) {
    const Clock::time_point start = Clock::now();
    for (std::int64_t i = 0; i < config.stepsPerChunk; ++i)
      m.steps.push_back(runStep(exchange, buffers, plan, config.standIn));
    m.chunkSeconds.push_back(secondsSince(start));
  }
  return m;
}

double bytesPerValue(engine::Compression compression) {
  return compression == engine::Compression::kNone ? 4.0 : 2.0;
}

nlohmann::json msStats(const std::vector<double>& seconds) {
  std::vector<double> ms(seconds.size());
  std::transform(seconds.begin(), seconds.end(), ms.begin(), [](double s) { return s * 1e3; });
  return {{"p50", percentile(ms, 50)}, {"p95", percentile(ms, 95)}, {"mean", mean(ms)}};
}

nlohmann::json boundJson(const BenchConfig& config, const StepBound& bound, double stepP50Ms) {
  nlohmann::json link = nullptr;
  if (config.linkGbit > 0) link = config.linkGbit;
  nlohmann::json communication = nullptr;
  if (bound.communicationSeconds) communication = *bound.communicationSeconds * 1e3;
  return {{"link_gbit", link},
          {"link", config.linkGbit > 0 ? "shaped" : "unshaped"},
          {"link_latency_us", config.linkLatencyUs},
          {"compute_ms", bound.computeSeconds * 1e3},
          {"communication_ms", communication},
          {"step_ms", bound.stepSeconds * 1e3},
          {"fraction_of_bound", stepP50Ms > 0 ? bound.stepSeconds * 1e3 / stepP50Ms : 0.0}};
}

nlohmann::json resultsJson(const BenchConfig& config, const GradientProfile& profile,
                           const engine::GradientExchange& exchange, const Measurements& m,
                           int ranks) {
  std::vector<double> step, wait, reduce, stepsPerSecond;
  for (const StepSample& s : m.steps) {
    step.push_back(s.seconds);
    wait.push_back(s.waitSeconds);
    reduce.push_back(s.reduceSeconds);
  }
  for (const double seconds : m.chunkSeconds)
    stepsPerSecond.push_back(static_cast<double>(config.stepsPerChunk) / seconds);
  const BenchConfig& e = config;
  const double parameters = static_cast<double>(profile.parameters());
  const int buckets = static_cast<int>(exchange.buckets().size());
  const StepBound bound =
      stepBound(config.computeMs, ranks, parameters * bytesPerValue(e.exchange.compression),
                buckets, config.linkGbit, config.linkLatencyUs);
  nlohmann::json samples = nullptr;
  if (config.batchSize > 0) {
    const double batch = config.batchSize;
    samples = {{"per_rank_mean", mean(stepsPerSecond) * batch},
               {"per_rank_ci95", ci95(stepsPerSecond) * batch},
               {"total", mean(stepsPerSecond) * batch * ranks}};
  }
  nlohmann::json j = {
      {"schema", "ringtrain-bench/1"},
      {"profile", profile.name},
      {"tensors", profile.tensors.size()},
      {"parameters", profile.parameters()},
      {"gradient_bytes", profile.parameters() * 4},
      {"wire_bytes", parameters * bytesPerValue(e.exchange.compression)},
      {"ranks", ranks},
      {"backend", std::string(options::name(e.exchange.backend))},
      {"engine",
       {{"overlap", e.exchange.overlap},
        {"fusion_threshold_bytes", e.exchange.fusionThresholdBytes},
        {"compression", std::string(engine::name(e.exchange.compression))}}},
      {"buckets", buckets},
      {"stand_in", std::string(nameIn(kStandInNames, config.standIn))},
      {"compute_ms", config.computeMs},
      {"batch_size", config.batchSize > 0 ? nlohmann::json(config.batchSize) : nullptr},
      {"warmup_steps", config.warmupSteps},
      {"chunks", config.chunks},
      {"steps_per_chunk", config.stepsPerChunk},
      {"step_ms", msStats(step)},
      {"exposed_communication_ms", msStats(wait)},
      {"averaging_ms", msStats(reduce)},
      {"steps_per_s",
       {{"per_rank_mean", mean(stepsPerSecond)}, {"per_rank_ci95", ci95(stepsPerSecond)}}},
      {"samples_per_s", samples},
  };
  j["bound"] = boundJson(config, bound, j["step_ms"]["p50"].get<double>());
  return j;
}

std::vector<std::string> tableLines(const nlohmann::json& r) {
  const auto& step = r["step_ms"];
  const auto& bound = r["bound"];
  std::vector<std::string> lines = {
      fmt::format("ringtrain bench: {} ({} tensors, {} parameters, {:.1f} MiB of gradients in {} "
                  "buckets) on {} rank(s)",
                  r["profile"].get<std::string>(), r["tensors"].get<int>(),
                  r["parameters"].get<std::int64_t>(),
                  r["gradient_bytes"].get<double>() / (1 << 20), r["buckets"].get<int>(),
                  r["ranks"].get<int>()),
      fmt::format("backend {}, overlap {}, fusion threshold {} KiB, compression {}; stand-in {} "
                  "for {} ms of compute per step",
                  r["backend"].get<std::string>(),
                  r["engine"]["overlap"].get<bool>() ? "on" : "off",
                  r["engine"]["fusion_threshold_bytes"].get<std::size_t>() >> 10,
                  r["engine"]["compression"].get<std::string>(), r["stand_in"].get<std::string>(),
                  r["compute_ms"].get<double>()),
      fmt::format("{} warm-up steps excluded; {} chunks of {} steps timed on rank 0",
                  r["warmup_steps"].get<int>(), r["chunks"].get<int>(),
                  r["steps_per_chunk"].get<int>()),
      fmt::format("  {:<28} {:>10} {:>10} {:>10}", "", "p50", "p95", "mean"),
  };
  for (const char* key : {"step_ms", "exposed_communication_ms", "averaging_ms"}) {
    lines.push_back(fmt::format("  {:<28} {:>10.2f} {:>10.2f} {:>10.2f}", key,
                                r[key]["p50"].get<double>(), r[key]["p95"].get<double>(),
                                r[key]["mean"].get<double>()));
  }
  lines.push_back(fmt::format("  {:<28} {:>10.3f} ± {:.3f}", "steps/s per rank",
                              r["steps_per_s"]["per_rank_mean"].get<double>(),
                              r["steps_per_s"]["per_rank_ci95"].get<double>()));
  if (!r["samples_per_s"].is_null()) {
    const auto& s = r["samples_per_s"];
    lines.push_back(fmt::format("  {:<28} {:>10.1f} ± {:.1f} per rank, {:.1f} in total (batch {})",
                                "samples/s", s["per_rank_mean"].get<double>(),
                                s["per_rank_ci95"].get<double>(), s["total"].get<double>(),
                                r["batch_size"].get<int>()));
  }
  const std::string link =
      bound["link_gbit"].is_null()
          ? std::string("unshaped: compute only")
          : fmt::format("{} Gbit/s, {} us latency", bound["link_gbit"].get<double>(),
                        bound["link_latency_us"].get<double>());
  lines.push_back(
      fmt::format("  {:<28} {:>10.2f} ms ({}); measured p50 {:.2f} ms: {:.3f} of the bound",
                  "analytic bound on the step", bound["step_ms"].get<double>(), link,
                  step["p50"].get<double>(), bound["fraction_of_bound"].get<double>()));
  return lines;
}

// Rank 0's report; an unwritable --json file ends the job on every rank.
void report(const BenchConfig& config, const nlohmann::json& results, int rank) {
  std::optional<std::string> error;
  if (rank == 0) {
    for (const std::string& line : tableLines(results))
      std::cout << line << "\n";
    std::cout << std::flush;
    if (!config.json.empty()) {
      std::ofstream out(config.json);
      out << results.dump(2) << "\n";
      if (!out) error = "--json " + config.json + ": cannot write the file";
    }
  }
  options::exitEverywhereOnError(error);
}

}  // namespace

StandInPlan planStandIn(const GradientProfile& profile, double computeMs) {
  StandInPlan plan;
  const double seconds = computeMs / 1e3;
  plan.forwardSeconds = seconds / 3;
  const double total = profile.flopsPerSample();
  const auto tensors = static_cast<double>(profile.tensors.size());
  for (const ProfileTensor& t : profile.tensors) {
    const double share = total > 0 ? t.flopsPerSample / total : 1 / tensors;
    plan.backwardSeconds.push_back(seconds * 2 / 3 * share);
  }
  return plan;
}

StepBound stepBound(double computeMs, int ranks, double wireBytes, int buckets, double linkGbit,
                    double linkLatencyUs) {
  StepBound bound;
  bound.computeSeconds = computeMs / 1e3;
  if (ranks == 1) {
    bound.communicationSeconds = 0.0;
  } else if (linkGbit > 0) {
    const double n = ranks;
    bound.communicationSeconds = 2 * (n - 1) / n * wireBytes * 8 / (linkGbit * 1e9) +
                                 2 * (n - 1) * buckets * linkLatencyUs / 1e6;
  }
  bound.stepSeconds = std::max(bound.computeSeconds, bound.communicationSeconds.value_or(0.0));
  return bound;
}

double percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double position = q / 100 * static_cast<double>(values.size() - 1);
  const auto below = static_cast<std::size_t>(std::floor(position));
  const std::size_t above = std::min(below + 1, values.size() - 1);
  return values[below] + (values[above] - values[below]) * (position - static_cast<double>(below));
}

double mean(const std::vector<double>& values) {
  if (values.empty()) return 0;
  return std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
}

double ci95(const std::vector<double>& values) {
  if (values.size() < 2) return 0;
  const double m = mean(values);
  double squares = 0;
  for (const double v : values)
    squares += (v - m) * (v - m);
  return 1.96 * std::sqrt(squares / static_cast<double>(values.size() - 1));
}

int benchCommand(int argc, char** argv, collectives::MpiEnvironment& env,
                 const std::filesystem::path& program) {
  const std::optional<BenchConfig> settled = settledConfig(argc, argv, env);
  if (!settled) return 0;  // --help
  const BenchConfig& config = *settled;
  const GradientProfile profile = loadProfile(config, program, env.localSize());
  const double stallTimeout = config.exchange.stallTimeoutSeconds;
  if (config.exchange.overlap || stallTimeout > 0) {
    env.requireThreadLevel(collectives::ThreadLevel::kMultiple,
                           "--overlap on or --stall-timeout (the gradient engine's threads)");
  }
  // Declared before the exchange, which it watches, so that it outlives it.
  std::optional<collectives::StallWatchdog> watchdog;
  std::unique_ptr<engine::GradientExchange> exchange = makeExchange(config, profile, env);
  collectives::Communicator* gradients = exchange->communicator();
  if (stallTimeout > 0 && gradients) {
    watchdog.emplace(env.world(), stallTimeout);
    watchdog->watch(*gradients, "gradient");
  }
  std::vector<float> buffer(static_cast<std::size_t>(profile.parameters()));
  const Measurements m = measure(config, profile, *exchange, buffer, env.world());
  const nlohmann::json results = resultsJson(config, profile, *exchange, m, env.worldSize());
  if (watchdog) watchdog->unwatch(*gradients);
  exchange.reset();  // joins the communication thread
  report(config, results, env.worldRank());
  return 0;
}

}  // namespace ringtrain::bench
