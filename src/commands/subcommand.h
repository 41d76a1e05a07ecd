// What the subcommands that run without MPI (generate, export) share: their command line, and
// the checkpoint they read.
#pragma once

#include <boost/program_options.hpp>
#include <filesystem>
#include <optional>
#include <string>

#include "storage/checkpoint.h"

namespace ringtrain::commands {

// Parses argv (argv[1] is the subcommand's name) into the variables `described` binds, with
// `positional` for arguments without an option name. With --help, prints `described` and sets
// `help`. Returns the error, one line, or nullopt.
std::optional<std::string> parseSubcommandLine(
    int argc, char** argv, const boost::program_options::options_description& described,
    const boost::program_options::positional_options_description& positional, bool& help);

// A checkpoint file as it is, or the newest good checkpoint of a folder (as --resume takes
// them). Throws storage::CheckpointError naming `path` when there is none.
storage::ResumePlan checkpointToRead(const std::filesystem::path& path);

}  // namespace ringtrain::commands
