// What the subcommands that run without MPI (check, export, generate) share: their command line,
// and the checkpoint they read.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "options/option_table.h"
#include "storage/checkpoint.h"

namespace ringtrain::commands {

// Prints --help's text on stdout and logs the variables' warnings.
void reportParsing(const options::Outcome& outcome);

// Parses argv (argv[1] is the subcommand's name) into `config` by `table`. With --help, prints
// the help and sets `help`. Returns the error, one line naming the option, or nullopt.
template <class Config>
std::optional<std::string> parseSubcommandLine(const options::Program& program,
                                               const options::Table<Config>& table, int argc,
                                               char** argv, Config& config, bool& help) {
  options::Outcome outcome;
  auto error = options::parse(program, table, argc - 1, argv + 1, config, outcome);
  reportParsing(outcome);
  help = outcome.help;
  return error;
}

// A checkpoint file as it is, or the newest good checkpoint of a folder (as --resume takes
// them). Throws storage::CheckpointError naming `path` when there is none.
storage::ResumePlan checkpointToRead(const std::filesystem::path& path);

}  // namespace ringtrain::commands
