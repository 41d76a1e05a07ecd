#include "training/run_report.h"

#include <fmt/format.h>

#include <algorithm>

#include "training/memory_report.h"

namespace ringtrain::training {
namespace {

std::string resultLine(const TrainingSummary& summary, const RunFacts& facts) {
  if (summary.lastEvaluation.samples == 0) return "not evaluated yet";
  if (facts.tokensPerSample > 0) {
    return fmt::format("final validation loss {:.4f} (token accuracy {:.4f})",
                       summary.lastEvaluation.meanLoss(), summary.lastEvaluation.accuracy());
  }
  if (facts.classification) {
    return fmt::format("final accuracy {:.4f}", summary.lastEvaluation.accuracy());
  }
  return fmt::format("final test loss {:.6f}", summary.lastEvaluation.meanLoss());
}

// Where the step time went, and how much of the averaging backward hid.
void addTimeLines(const TrainingSummary& summary, std::vector<std::string>& lines) {
  const double total = std::max(1e-9, summary.trainingSeconds);
  const double steps = static_cast<double>(std::max<std::int64_t>(1, summary.steps));
  lines.push_back(fmt::format(
      "time per step: data {:.0f}%, forward+backward {:.0f}%, waiting for averaged gradients "
      "{:.0f}%, optimiser {:.0f}% ({:.3f} ms per step)",
      100 * summary.dataSeconds / total, 100 * summary.computeSeconds / total,
      100 * summary.waitSeconds / total, 100 * summary.optimizerSeconds / total,
      1000 * total / steps));
  if (summary.reduceSeconds > 0) {
    lines.push_back(
        fmt::format("gradient all-reduces took {:.3f} ms per step, {:.0f}% of it not hidden behind "
                    "computation",
                    1000 * summary.reduceSeconds / steps,
                    100 * std::min(1.0, summary.waitSeconds / summary.reduceSeconds)));
  }
  if (summary.stopCheckSeconds > 0) {
    lines.push_back(
        fmt::format("the per-step SIGTERM check took {:.1f} us per step (--sigterm-grace 0 "
                    "turns it off)",
                    1e6 * summary.stopCheckSeconds / steps));
  }
}

// What the run left behind and how it ended.
void addOutcomeLines(const TrainingSummary& summary, const TrainConfig& config,
                     std::vector<std::string>& lines) {
  if (summary.skippedSteps > 0) {
    lines.push_back(
        fmt::format("{} step(s) skipped for non-finite gradients", summary.skippedSteps));
  }
  if (!config.timeline.empty()) lines.push_back("timeline written to " + config.timeline);
  if (summary.checkpoints > 0) {
    lines.push_back(fmt::format(
        "{} checkpoint(s) written, {:.1f} ms each on average; the last: {}", summary.checkpoints,
        1e3 * summary.checkpointSeconds / summary.checkpoints, summary.lastCheckpoint));
  }
  if (!config.logdir.empty()) lines.push_back("TensorBoard logs in " + config.logdir);
  if (summary.stoppedBySigterm) {
    lines.push_back(
        fmt::format("stopped by SIGTERM after step {}{}; exit status {}", summary.lastStep,
                    config.checkpointDir.empty() ? " (no --checkpoint-dir: nothing saved)"
                                                 : "; rerun with --resume auto to continue",
                    config.sigtermExitCode));
  }
}

}  // namespace

std::string formatDuration(double seconds) {
  const auto total = static_cast<std::int64_t>(std::max(0.0, seconds) + 0.5);
  const std::int64_t hours = total / 3600;
  const std::int64_t minutes = total / 60 % 60;
  const std::int64_t rest = total % 60;
  if (hours > 0) return fmt::format("{}:{:02}:{:02}", hours, minutes, rest);
  return fmt::format("{}:{:02}", minutes, rest);
}

std::string progressLine(const Progress& p) {
  const std::int64_t done = p.step - p.firstStep;
  const double left = done > 0 ? p.elapsedSeconds / static_cast<double>(done) *
                                     static_cast<double>(p.steps - p.step)
                               : 0;
  const bool tokens = p.tokensPerSample > 0;
  const double rate = p.samplesPerSecond * static_cast<double>(tokens ? p.tokensPerSample : 1);
  return fmt::format(
      "step {}/{} (epoch {}/{})  loss {:.4f}  lr {:.5f}  {:.0f} {}/s ({:.0f}/rank), {} "
      "elapsed, ~{} left",
      p.step, p.steps, p.epoch, p.epochs, p.loss, p.learningRate, rate,
      tokens ? "tokens" : "samples", rate / std::max(1, p.ranks), formatDuration(p.elapsedSeconds),
      formatDuration(left));
}

std::vector<std::string> runReport(const TrainingSummary& summary, const TrainConfig& config,
                                   const RunFacts& facts) {
  std::vector<std::string> lines;
  if (config.model == ModelKind::kLinreg && facts.parameters.size() >= 2) {
    lines.push_back(fmt::format("learned y = {:.4f} x + {:.4f} (the data: y = 2 x + 10 + noise)",
                                facts.parameters[0], facts.parameters[1]));
  }
  lines.push_back(fmt::format(
      "done: {} steps{} in {:.2f} s of training ({:.2f} s wall), {:.0f} samples/s "
      "({:.0f} per rank{}), {}; replicas {}",
      summary.steps,
      summary.firstStep > 0
          ? fmt::format(" (steps {} to {}, resumed)", summary.firstStep + 1, summary.lastStep)
          : "",
      summary.trainingSeconds, summary.wallSeconds, summary.samplesPerSecond,
      summary.samplesPerSecondPerRank,
      facts.tokensPerSample > 0
          ? fmt::format("; {:.0f} tokens/s",
                        summary.samplesPerSecond * static_cast<double>(facts.tokensPerSample))
          : "",
      resultLine(summary, facts), summary.replicasIdentical ? "identical" : "DIFFER"));
  // Two runs that end with the same fingerprint hold the same parameters, bit for bit.
  lines.push_back(fmt::format("parameters after step {}: fingerprint {:016x}", summary.lastStep,
                              summary.parameterFingerprint));
  addTimeLines(summary, lines);
  if (!summary.memory.empty()) lines.push_back(memoryLine(summary.memory));
  addOutcomeLines(summary, config, lines);
  return lines;
}

}  // namespace ringtrain::training
