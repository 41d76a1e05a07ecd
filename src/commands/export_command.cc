#include "src/commands/export_command.h"

#include <boost/program_options.hpp>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>

#include "base/exit_status.h"
#include "src/commands/subcommand.h"
#include "storage/safetensors.h"
#include "training/exported_weights.h"

namespace ringtrain::commands {
namespace {

namespace po = boost::program_options;

struct ExportOptions {
  std::filesystem::path checkpoint;
  std::filesystem::path out;
};

std::optional<std::string> parseOptions(int argc, char** argv, ExportOptions& o, bool& help) {
  po::options_description described(
      "ringtrain export --format safetensors CHECKPOINT OUT: a checkpoint's weights for other "
      "tools");
  std::string format = "safetensors", checkpoint, out;
  // clang-format off
  described.add_options()
      ("help,h", "print this help")
      ("format", po::value(&format)->default_value(format), "safetensors (the only format)")
      ("checkpoint", po::value(&checkpoint)->required(), "a checkpoint (ckpt-<step>.h5), or its folder (the newest good one)")
      ("out", po::value(&out)->required(), "the file to write (replaced if it exists)");
  // clang-format on
  po::positional_options_description positional;
  positional.add("checkpoint", 1).add("out", 1);
  if (auto error = parseSubcommandLine(argc, argv, described, positional, help)) return error;
  if (help) return std::nullopt;
  if (format != "safetensors") return "--format " + format + ": the only format is safetensors";
  o.checkpoint = checkpoint;
  o.out = out;
  return std::nullopt;
}

}  // namespace

int exportCommand(int argc, char** argv, std::string_view version) {
  ExportOptions options;
  bool help = false;
  try {
    if (const auto problem = parseOptions(argc, argv, options, help)) {
      std::cerr << "ringtrain export: " << *problem << "\n";
      return kExitBadInput;
    }
    if (help) return kExitOk;
    const storage::ResumePlan plan = checkpointToRead(options.checkpoint);
    const storage::SafetensorsContent content = training::exportedWeights(plan.content, version);
    storage::writeSafetensors(options.out, content);
    std::cout << options.out.string() << ": " << content.tensors.size() << " tensors of step "
              << plan.content.step << " from " << plan.path.string() << "\n";
  } catch (const std::exception& e) {
    std::cerr << "ringtrain export: " << e.what() << "\n";
    return kExitBadInput;
  }
  return kExitOk;
}

}  // namespace ringtrain::commands
