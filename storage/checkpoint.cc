#include "storage/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "base/exit_status.h"
#include "base/file_checks.h"
#include "formats/durable_io.h"
#include "formats/format_error.h"
#include "storage/checkpoint_format.h"

namespace ringtrain::storage {
namespace {

namespace fs = std::filesystem;
using checkpoint_format::fail;
using checkpoint_format::splitLines;

constexpr const char* kLatestName = "latest";
constexpr std::string_view kCheckpointPrefix = "ckpt-";
constexpr std::string_view kCheckpointSuffix = ".h5";
constexpr std::string_view kTemporaryMarker = ".tmp-";

// ---- The folder -------------------------------------------------------------------------------

// The step of a checkpoint file name "ckpt-<digits>.h5", or nullopt for any other name.
std::optional<std::int64_t> stepOfName(std::string_view name) {
  if (!name.starts_with(kCheckpointPrefix) || !name.ends_with(kCheckpointSuffix)) {
    return std::nullopt;
  }
  const std::string_view digits = name.substr(
      kCheckpointPrefix.size(), name.size() - kCheckpointPrefix.size() - kCheckpointSuffix.size());
  if (digits.empty()) return std::nullopt;
  std::int64_t step = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), step);
  if (error != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return step;
}

struct Listed {
  std::int64_t step;
  fs::path path;
};

// The folder's checkpoint files, the highest step first.
std::vector<Listed> listCheckpoints(const fs::path& dir) {
  std::vector<Listed> found;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (const auto step = stepOfName(it->path().filename().string())) {
      found.push_back({*step, it->path()});
    }
  }
  if (ec) fail(dir, "cannot list the checkpoint folder: " + ec.message());
  std::sort(found.begin(), found.end(),
            [](const Listed& a, const Listed& b) { return a.step > b.step; });
  return found;
}

bool isTemporaryName(std::string_view name) {
  return name.starts_with(".") && name.find(kTemporaryMarker) != std::string_view::npos &&
         (name.starts_with(".ckpt-") || name.starts_with(".latest"));
}

std::string readLatest(const fs::path& dir) {
  // Only a hint for the log: anything but a regular file (a FIFO would block open) is no hint.
  if (base::regularFileProblem(dir / kLatestName)) return "";
  const int fd = ::open((dir / kLatestName).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  char text[256];
  const ssize_t n = ::read(fd, text, sizeof text);
  ::close(fd);
  if (n <= 0) return "";
  std::string name(text, static_cast<std::size_t>(n));
  while (!name.empty() && (name.back() == '\n' || name.back() == '\r' || name.back() == ' '))
    name.pop_back();
  return name;
}

[[noreturn]] void crashNow() {
  std::raise(SIGKILL);
  std::_Exit(kExitKilled);  // not reached: SIGKILL cannot be caught
}

void crashIf(CrashPoint at, CrashPoint here) {
  if (at != CrashPoint::kNone && at == here) crashNow();
}

std::string temporaryName(const std::string& name) {
  return "." + name + std::string(kTemporaryMarker) + std::to_string(static_cast<long>(getpid()));
}

// Writes `bytes` under a temporary name and renames it to dir/name, durably. On failure the
// temporary is removed and CheckpointError thrown; the crash points sit between the stages.
void replaceDurably(const fs::path& dir, const std::string& name,
                    std::span<const std::uint8_t> bytes, CrashPoint crashAt,
                    CrashPoint partialPoint, CrashPoint beforeRenamePoint) {
  const fs::path temporary = dir / temporaryName(name);
  std::error_code ignored;
  fs::remove(temporary, ignored);  // a leftover of a writer that had our process id
  try {
    if (crashAt != CrashPoint::kNone && crashAt == partialPoint) {
      formats::writeNewFileDurably(temporary, bytes.first(bytes.size() / 2));
      crashNow();
    }
    formats::writeNewFileDurably(temporary, bytes);
    crashIf(crashAt, beforeRenamePoint);
    formats::renameDurably(temporary, dir / name);
  } catch (const formats::FormatError& e) {
    fs::remove(temporary, ignored);
    throw CheckpointError(e.what());
  }
}

// Removes the checkpoints of `own` (this writer's, the new one among them) beyond the newest
// `keep`, and stale temporaries; lists the folder's other checkpoints in result.keptOthers.
void prune(const fs::path& dir, std::vector<fs::path>& own, int keep, CrashPoint crashAt,
           CheckpointWriteResult& result) {
  const auto removeOne = [&](const fs::path& path) {
    std::error_code ec;
    if (fs::remove(path, ec)) {
      result.removed.push_back(path);
    } else if (ec) {
      result.warnings.push_back(path.string() + ": cannot remove: " + ec.message());
    }
  };
  int kept = 1;  // the new checkpoint
  for (const Listed& listed : listCheckpoints(dir)) {
    const auto mine = std::find(own.begin(), own.end(), listed.path);
    if (mine == own.end()) {
      result.keptOthers.push_back(listed.path);
    } else if (listed.path == result.path || keep == 0 || kept < keep) {
      kept += listed.path == result.path ? 0 : 1;
    } else {
      removeOne(listed.path);
      own.erase(mine);
      crashIf(crashAt, CrashPoint::kDuringPrune);
    }
  }
  // Temporaries are only ever this writer's, and its own are renamed by now: anything left is
  // from a writer that died.
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (isTemporaryName(it->path().filename().string())) removeOne(it->path());
  }
  if (!result.removed.empty()) {
    try {
      formats::syncFolder(dir);
    } catch (const formats::FormatError& e) {
      result.warnings.push_back(e.what());
    }
  }
}

}  // namespace

std::string_view crashPointName(CrashPoint point) {
  switch (point) {
    case CrashPoint::kNone:
      return "none";
    case CrashPoint::kDuringTemporaryWrite:
      return "during-temporary-write";
    case CrashPoint::kBeforeRename:
      return "before-rename";
    case CrashPoint::kBeforeLatest:
      return "before-latest";
    case CrashPoint::kBeforeLatestRename:
      return "before-latest-rename";
    case CrashPoint::kBeforePrune:
      return "before-prune";
    case CrashPoint::kDuringPrune:
      return "during-prune";
  }
  return "none";
}

std::optional<CrashPoint> crashPointFromName(std::string_view name) {
  for (const CrashPoint point :
       {CrashPoint::kNone, CrashPoint::kDuringTemporaryWrite, CrashPoint::kBeforeRename,
        CrashPoint::kBeforeLatest, CrashPoint::kBeforeLatestRename, CrashPoint::kBeforePrune,
        CrashPoint::kDuringPrune}) {
    if (crashPointName(point) == name) return point;
  }
  return std::nullopt;
}

std::string checkpointFileName(std::int64_t step) {
  char name[40];
  std::snprintf(name, sizeof name, "ckpt-%08lld.h5", static_cast<long long>(step));
  return name;
}
CheckpointWriter::CheckpointWriter(fs::path dir, int keep) : dir_(std::move(dir)), keep_(keep) {
  if (keep < 0) throw std::invalid_argument("CheckpointWriter: keep is negative");
}

CheckpointWriteResult CheckpointWriter::write(const CheckpointContent& content,
                                              CrashPoint crashAt) {
  const fs::path& dir = dir_;
  const std::vector<std::uint8_t> bytes = encodeCheckpoint(content);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail(dir, "cannot create the checkpoint folder: " + ec.message());

  CheckpointWriteResult result;
  const std::string name = checkpointFileName(content.step);
  result.path = dir / name;
  replaceDurably(dir, name, bytes, crashAt, CrashPoint::kDuringTemporaryWrite,
                 CrashPoint::kBeforeRename);
  // Ours from here on, also when it replaced a file of that name (the same step rewritten).
  if (std::find(written_.begin(), written_.end(), result.path) == written_.end()) {
    written_.push_back(result.path);
  }
  crashIf(crashAt, CrashPoint::kBeforeLatest);
  // The checkpoint is complete from here on: what follows can only warn.
  const std::string latest = name + "\n";
  try {
    replaceDurably(dir, kLatestName,
                   std::span(reinterpret_cast<const std::uint8_t*>(latest.data()), latest.size()),
                   crashAt, CrashPoint::kNone, CrashPoint::kBeforeLatestRename);
  } catch (const CheckpointError& e) {
    result.warnings.push_back(e.what());
  }
  crashIf(crashAt, CrashPoint::kBeforePrune);
  prune(dir, written_, keep_, crashAt, result);
  return result;
}

std::vector<CheckpointFile> checkpointFiles(const fs::path& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return {};
  std::vector<CheckpointFile> files;
  for (const Listed& listed : listCheckpoints(dir))
    files.push_back({listed.step, listed.path});
  return files;
}

std::optional<ResumePlan> findCheckpointToResume(const fs::path& dir,
                                                 std::string_view expectedModelLayout,
                                                 const TakeCheckpoint& take) {
  std::error_code ec;
  const auto status = fs::status(dir, ec);
  if (!fs::exists(status)) return std::nullopt;
  if (!fs::is_directory(status)) fail(dir, "not a folder");
  const std::vector<Listed> candidates = listCheckpoints(dir);
  if (candidates.empty()) return std::nullopt;
  ResumePlan plan;
  plan.latest = readLatest(dir);
  for (const Listed& candidate : candidates) {
    try {
      plan.content = readCheckpoint(candidate.path, expectedModelLayout);
      if (plan.content.step != candidate.step) {  // renamed or copied in: never this run's start
        plan.skipped.push_back(candidate.path.string() + ": its step inside is " +
                               std::to_string(plan.content.step) + ", not the " +
                               std::to_string(candidate.step) + " of its name (another run's?)");
        continue;
      }
      if (take) take(plan.content, candidate.path);
      plan.path = candidate.path;
      return plan;
    } catch (const formats::FormatError& e) {
      plan.skipped.push_back(e.what());
    }
  }
  std::string reasons;
  for (const std::string& reason : plan.skipped)
    reasons += (reasons.empty() ? "" : "; ") + reason;
  fail(dir, "no usable checkpoint among " + std::to_string(candidates.size()) + ": " + reasons);
}

std::optional<ResumePlan> resolveResume(const std::string& resume, const fs::path& checkpointDir,
                                        std::string_view expectedModelLayout,
                                        const TakeCheckpoint& take) {
  if (resume == "auto") return findCheckpointToResume(checkpointDir, expectedModelLayout, take);
  std::error_code ec;
  if (fs::is_directory(resume, ec)) {
    std::optional<ResumePlan> plan = findCheckpointToResume(resume, expectedModelLayout, take);
    if (!plan) fail(resume, "no checkpoint (ckpt-*.h5) in this folder");
    return plan;
  }
  ResumePlan plan;
  plan.path = resume;
  plan.content = readCheckpoint(resume, expectedModelLayout);
  if (take) take(plan.content, plan.path);
  return plan;
}

std::string describeResume(const ResumePlan& plan) {
  const CheckpointContent& c = plan.content;
  std::string text = "resuming from " + plan.path.string() + " (step " + std::to_string(c.step) +
                     ", epoch " + std::to_string(c.epoch) + ", written by " +
                     std::to_string(c.worldSize) + " rank" + (c.worldSize == 1 ? "" : "s") + ")";
  if (!plan.latest.empty() && plan.latest != plan.path.filename().string()) {
    text += "; `latest` names " + plan.latest;
  }
  for (const std::string& skipped : plan.skipped)
    text += "; skipped " + skipped;
  return text;
}

std::vector<std::string> configChanges(std::string_view saved, std::string_view current) {
  // "name = value" lines are matched by name; any other line only by being in both texts or not.
  struct Line {
    std::string_view key;
    std::string_view value;  // the whole line when it has no " = "
    bool keyed;
  };
  const auto parse = [](std::string_view text) {
    std::vector<Line> lines;
    for (const std::string_view line : splitLines(text)) {
      const std::size_t equals = line.find(" = ");
      if (equals == std::string_view::npos) {
        lines.push_back({line, line, false});
      } else {
        lines.push_back({line.substr(0, equals), line.substr(equals + 3), true});
      }
    }
    return lines;
  };
  const std::vector<Line> before = parse(saved);
  const std::vector<Line> after = parse(current);
  const auto find = [](const std::vector<Line>& lines, const Line& wanted) {
    return std::find_if(lines.begin(), lines.end(), [&](const Line& line) {
      return line.keyed == wanted.keyed && line.key == wanted.key;
    });
  };
  const auto quote = [](const Line& line) { return std::string(line.value); };
  std::vector<std::string> changes;
  for (const Line& line : before) {
    const auto match = find(after, line);
    if (!line.keyed) {
      if (match == after.end()) changes.push_back("removed: " + quote(line));
    } else if (match == after.end()) {
      changes.push_back(std::string(line.key) + ": " + quote(line) + " -> (not set)");
    } else if (match->value != line.value) {
      changes.push_back(std::string(line.key) + ": " + quote(line) + " -> " + quote(*match));
    }
  }
  for (const Line& line : after) {
    if (find(before, line) != before.end()) continue;
    changes.push_back(line.keyed ? std::string(line.key) + ": (not set) -> " + quote(line)
                                 : "added: " + quote(line));
  }
  return changes;
}

}  // namespace ringtrain::storage
