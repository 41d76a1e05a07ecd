#include "src/commands/subcommand.h"

#include <iostream>

#include "base/log.h"

namespace ringtrain::commands {

void reportParsing(const options::Outcome& outcome) {
  if (outcome.help) std::cout << outcome.helpText;
  for (const std::string& warning : outcome.warnings)
    logLine(LogLevel::kWarn, "warning: " + warning);
}

storage::ResumePlan checkpointToRead(const std::filesystem::path& path) {
  std::optional<storage::ResumePlan> plan = storage::resolveResume(path.string(), {});
  if (!plan) throw storage::CheckpointError(path.string() + ": no checkpoint in it");
  return std::move(*plan);
}

}  // namespace ringtrain::commands
