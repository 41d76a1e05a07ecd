#include "training/checkpoint_policy.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <exception>
#include <span>
#include <string_view>
#include <system_error>
#include <variant>

#include "base/steady_clock.h"
#include "collectives/mpi_check.h"
#include "training/exported_weights.h"

namespace ringtrain::training {
namespace {

// A refusal's text crosses the ranks packed into int64 words.
void broadcastText(collectives::Communicator& comm, std::string& text) {
  std::int64_t length = static_cast<std::int64_t>(text.size());
  comm.broadcast(std::span<std::int64_t>(&length, 1), 0);
  if (length == 0) return;
  std::vector<std::int64_t> words(static_cast<std::size_t>(length + 7) / 8, 0);
  if (comm.rank() == 0) std::memcpy(words.data(), text.data(), text.size());
  comm.broadcast(std::span<std::int64_t>(words), 0);
  text.assign(reinterpret_cast<const char*>(words.data()), static_cast<std::size_t>(length));
}

// A saved configuration without its "# ..." lines, to compare with this run's configLines.
std::string withoutComments(std::string_view text) {
  std::string kept;
  while (!text.empty()) {
    const std::size_t end = std::min(text.find('\n'), text.size());
    if (!text.starts_with("#")) kept.append(text.substr(0, end)).append("\n");
    text.remove_prefix(std::min(end + 1, text.size()));
  }
  return kept;
}

}  // namespace

void broadcastStartDecision(collectives::Communicator& comm, StartDecision& decision) {
  // What it is and the ResumePoint's numbers, as int64 words.
  ResumePoint& p = decision.point;
  std::array<std::int64_t, 7> words{};
  if (comm.rank() == 0) {
    words = {static_cast<std::int64_t>(decision.kind),
             p.step,
             p.sampler.epoch,
             p.sampler.step,
             p.optimizerSteps,
             p.batchSize,
             std::bit_cast<std::int64_t>(p.baseLr)};
  }
  comm.broadcast(std::span<std::int64_t>(words), 0);
  decision.kind = static_cast<StartKind>(words[0]);
  if (decision.kind == StartKind::kRefused) broadcastText(comm, decision.refusal);
  if (decision.kind != StartKind::kResumed) return;
  p.step = words[1];
  p.sampler = {words[2], words[3]};
  p.optimizerSteps = words[4];
  p.batchSize = static_cast<int>(words[5]);
  p.baseLr = std::bit_cast<double>(words[6]);
}

CheckpointPolicy::CheckpointPolicy(const TrainConfig& config, const TrainingReporter& reporter,
                                   engine::Timeline* timeline)
    : config_(config), reporter_(reporter), timeline_(timeline) {}

bool CheckpointPolicy::dueAfter(std::int64_t done, bool epochEnded,
                                std::int64_t plannedSteps) const {
  const bool due = config_.checkpointEvery > 0 ? done % config_.checkpointEvery == 0 : epochEnded;
  return due && done < plannedSteps;
}

SavedCheckpoint CheckpointPolicy::save(std::int64_t step,
                                       const std::function<storage::CheckpointContent()>& content) {
  const std::int64_t start = steadyNowNs();
  storage::CheckpointWriteResult written;
  try {
    if (!writer_) writer_.emplace(config_.checkpointDir, config_.keep);
    written = writer_->write(content());
  } catch (const std::exception& e) {
    // The checkpoints written before are intact; training on without the ones asked for could
    // throw hours away at the next failure.
    collectives::abortJob(fmt::format("error: checkpoint at step {}: {}", step, e.what()));
  }
  if (timeline_) timeline_->span("checkpoint", "checkpoint", start, steadyNowNs());
  const double seconds = static_cast<double>(steadyNowNs() - start) * 1e-9;
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(written.path, ec);
  reporter_.log(fmt::format("checkpoint {} written ({:.1f} MB in {:.1f} ms)", written.path.string(),
                            ec ? 0.0 : static_cast<double>(bytes) / 1e6, seconds * 1e3));
  for (const std::string& warning : written.warnings)
    reporter_.log("warning: " + warning);
  logKeptOthers(written.keptOthers);
  return {written.path.string(), seconds};
}

void CheckpointPolicy::logKeptOthers(const std::vector<std::filesystem::path>& others) {
  if (others.empty() || keptOthersLogged_ || config_.keep == 0) return;
  keptOthersLogged_ = true;
  std::string names;
  for (const std::filesystem::path& other : others)
    names += (names.empty() ? "" : ", ") + other.filename().string();
  reporter_.log(
      fmt::format("--keep {} prunes only this run's checkpoints: {} other(s) in {} stay ({}); "
                  "remove them by hand when they are no longer needed",
                  config_.keep, others.size(), config_.checkpointDir, names));
}

StartDecision CheckpointPolicy::decideOnRoot(models::Model<float>& model, Optimizer& optimizer,
                                             int worldSize, std::int64_t datasetSize) {
  StartDecision decision;
  std::optional<ResumePoint> point;
  bool initialised = false;
  try {
    point = resumePoint(model, optimizer, worldSize, datasetSize);
    initialised = !point && initialiseFromFile(model);
  } catch (const std::exception& e) {
    decision.refusal = e.what();
  }
  decision.kind = !decision.refusal.empty() ? StartKind::kRefused
                  : point                   ? StartKind::kResumed
                  : initialised             ? StartKind::kInitialised
                                            : StartKind::kFresh;
  if (point) decision.point = std::move(*point);
  return decision;
}

std::optional<ResumePoint> CheckpointPolicy::resumePoint(models::Model<float>& model,
                                                         Optimizer& optimizer, int worldSize,
                                                         std::int64_t datasetSize) {
  namespace fs = std::filesystem;
  // Every reason this run cannot continue from a checkpoint is found while choosing it, so that
  // --resume auto passes over one of another optimiser as it does over a damaged one.
  std::optional<ResumePoint> point;
  const storage::TakeCheckpoint take = [&](const storage::CheckpointContent& saved,
                                           const fs::path& file) {
    auto decision = planResume(saved, config_, worldSize, datasetSize);
    if (const std::string* refusal = std::get_if<std::string>(&decision)) {
      throw storage::CheckpointError(file.string() + ": " + *refusal);
    }
    restoreCheckpoint(saved, model, optimizer, nameIn(kOptimizerNames, config_.optimizer), file);
    point = std::get<ResumePoint>(decision);
  };
  std::optional<storage::ResumePlan> plan;
  if (config_.resume != "none") {
    plan = storage::resolveResume(config_.resume, config_.checkpointDir, model.describe(), take);
  }
  // With --resume auto (or the folder itself) every newer one was unreadable or unusable here,
  // and was reported as skipped.
  std::error_code ec;
  const bool searchedTheFolder =
      plan && !config_.checkpointDir.empty() &&
      (config_.resume == "auto" || fs::equivalent(config_.resume, config_.checkpointDir, ec));
  refuseNewerCheckpoints(plan ? plan->content.step : 0, searchedTheFolder);
  if (!plan) {
    if (config_.resume == "auto") {
      reporter_.log("no checkpoint in " + config_.checkpointDir + " yet: starting from step 0");
    }
    return std::nullopt;
  }
  reporter_.log(storage::describeResume(*plan));
  logChanges(*plan, point->batchSize);
  for (const std::string& note : point->notes)
    reporter_.log(note);
  reporter_.markResumed(point->step);
  return point;
}

void CheckpointPolicy::refuseNewerCheckpoints(std::int64_t start, bool searchedTheFolder) const {
  // Checkpoints of --checkpoint-dir newer than this run's start would be taken for this run's by
  // a later --resume auto (and keep-N would prune this run's first).
  if (config_.checkpointDir.empty() || searchedTheFolder) return;
  const std::vector<storage::CheckpointFile> files =
      storage::checkpointFiles(config_.checkpointDir);
  if (!files.empty() && files.front().step > start) {
    throw storage::CheckpointError(fmt::format(
        "--checkpoint-dir {} already holds checkpoints up to step {} ({}), newer than this "
        "run's start at step {}: continue them with --resume auto, or move them away",
        config_.checkpointDir, files.front().step, files.front().path.filename().string(), start));
  }
}

void CheckpointPolicy::logChanges(const storage::ResumePlan& plan, int batchSize) const {
  TrainConfig resumed = config_;
  resumed.batchSize = batchSize;
  // Where this run keeps its files is no change worth a line.
  std::string changes;
  for (const std::string& change :
       storage::configChanges(withoutComments(plan.content.config), configLines(resumed))) {
    const bool whereFilesGo = change.starts_with("checkpoint-dir:") ||
                              change.starts_with("checkpoint-every:") ||
                              change.starts_with("keep:") || change.starts_with("logdir:");
    if (!whereFilesGo) changes += (changes.empty() ? "" : "; ") + change;
  }
  if (!changes.empty()) reporter_.log("options changed since that checkpoint: " + changes);
}

bool CheckpointPolicy::initialiseFromFile(models::Model<float>& model) const {
  if (config_.initFrom.empty()) return false;
  loadWeightsFile(config_.initFrom, model);
  reporter_.log("initial weights from " + config_.initFrom + " (" +
                std::to_string(model.parameterTable().size()) + " tensors)");
  return true;
}

}  // namespace ringtrain::training
