#include "src/commands/subcommand.h"

#include <iostream>

namespace ringtrain::commands {

namespace po = boost::program_options;

std::optional<std::string> parseSubcommandLine(int argc, char** argv,
                                               const po::options_description& described,
                                               const po::positional_options_description& positional,
                                               bool& help) {
  try {
    po::variables_map values;
    po::store(
        po::command_line_parser(argc - 1, argv + 1).options(described).positional(positional).run(),
        values);
    if (values.count("help")) {
      std::cout << described;
      help = true;
      return std::nullopt;
    }
    po::notify(values);
  } catch (const po::error& e) {
    return e.what();
  }
  return std::nullopt;
}

storage::ResumePlan checkpointToRead(const std::filesystem::path& path) {
  std::optional<storage::ResumePlan> plan = storage::resolveResume(path.string(), {});
  if (!plan) throw storage::CheckpointError(path.string() + ": no checkpoint in it");
  return std::move(*plan);
}

}  // namespace ringtrain::commands
