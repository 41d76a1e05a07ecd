#include "src/commands/export_command.h"

#include <filesystem>
#include <iostream>
#include <optional>
#include <string>

#include "base/exit_status.h"
#include "base/named_values.h"
#include "options/option_table.h"
#include "src/commands/subcommand.h"
#include "storage/safetensors.h"
#include "training/exported_weights.h"

namespace ringtrain::commands {
namespace {

enum class ExportFormat { kSafetensors };
inline constexpr NamedValue<ExportFormat> kExportFormatNames[] = {
    {ExportFormat::kSafetensors, "safetensors"}};

struct ExportOptions {
  ExportFormat format = ExportFormat::kSafetensors;
  std::string checkpoint;
  std::string out;
};

// --format: one format there is, and the error says so.
options::Option<ExportOptions> formatOption() {
  options::Option<ExportOptions> option = options::choice<ExportOptions>(
      "format", RINGTRAIN_FIELD(format), kExportFormatNames, "the only format");
  option.read = [](ExportOptions& o, const std::string& text) -> std::optional<std::string> {
    const auto format = valueIn(kExportFormatNames, text);
    if (!format) return "--format " + text + ": the only format is safetensors";
    o.format = *format;
    return std::nullopt;
  };
  return option;
}

const options::Table<ExportOptions>& exportOptionTable() {
  const std::string group = "ringtrain export: a checkpoint's weights for other tools";
  constexpr auto kPerRank = options::Agreement::kPerRank;  // one process: nothing compared
  using options::with;
  static const options::Table<ExportOptions> table = [&] {
    // clang-format off
    options::Table<ExportOptions> rows = {
        with(formatOption(), group, kPerRank),
        with(options::text<ExportOptions>("checkpoint", RINGTRAIN_FIELD(checkpoint), "a checkpoint (ckpt-<step>.h5), or its folder (the newest good one)"), group, kPerRank),
        with(options::text<ExportOptions>("out", RINGTRAIN_FIELD(out), "the file to write (replaced if it exists)"), group, kPerRank),
    };
    // clang-format on
    for (std::size_t row = 1; row < rows.size(); ++row) {  // CHECKPOINT OUT, bare or named
      rows[row].required = true;
      rows[row].positional = true;
    }
    return rows;
  }();
  return table;
}

const options::Program kExportProgram{
    "export", "usage: ringtrain export --format safetensors CHECKPOINT OUT"};

}  // namespace

std::vector<options::Spec> exportOptionSpecs() {
  return options::specsOf(exportOptionTable());
}

int exportCommand(int argc, char** argv, std::string_view version) {
  ExportOptions options;
  bool help = false;
  try {
    if (const auto problem =
            parseSubcommandLine(kExportProgram, exportOptionTable(), argc, argv, options, help)) {
      std::cerr << "ringtrain export: " << *problem << "\n";
      return kExitBadInput;
    }
    if (help) return kExitOk;
    const storage::ResumePlan plan = checkpointToRead(options.checkpoint);
    const storage::SafetensorsContent content = training::exportedWeights(plan.content, version);
    storage::writeSafetensors(options.out, content);
    std::cout << options.out << ": " << content.tensors.size() << " tensors of step "
              << plan.content.step << " from " << plan.path.string() << "\n";
  } catch (const std::exception& e) {
    std::cerr << "ringtrain export: " << e.what() << "\n";
    return kExitBadInput;
  }
  return kExitOk;
}

}  // namespace ringtrain::commands
