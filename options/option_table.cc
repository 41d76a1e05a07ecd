#include "options/option_table.h"

#include <fmt/format.h>
#include <unistd.h>  // environ

#include <algorithm>
#include <boost/program_options.hpp>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/file_checks.h"

namespace ringtrain {
namespace po = boost::program_options;

namespace options {
namespace {

std::string trimmed(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) return "";
  return std::string(text.substr(first, text.find_last_not_of(" \t\r") - first + 1));
}

std::size_t editDistance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// The warning for a RINGTRAIN_* variable that names no option, with the closest option.
std::string unknownVariableWarning(const std::string& variable, const Program& program,
                                   const std::vector<Spec>& specs) {
  const std::string name = optionNameOf(variable);
  std::string best;
  std::size_t bestDistance = 0;
  for (const Spec& spec : specs) {
    if (spec.hidden) continue;
    const std::size_t distance = editDistance(name, spec.name);
    if (best.empty() || distance < bestDistance) {
      best = spec.name;
      bestDistance = distance;
    }
  }
  std::string text =
      fmt::format("{} names no option of ringtrain {}: ignored", variable, program.name);
  if (!best.empty() && bestDistance <= std::max<std::size_t>(2, name.size() / 3))
    text += fmt::format(" (did you mean {}, --{}?)", variableNameOf(best), best);
  return text;
}

po::options_description describedOptions(const std::vector<Spec>& specs, bool forHelp) {
  po::options_description all;
  std::vector<std::string> groups;
  for (const Spec& spec : specs) {
    if (std::find(groups.begin(), groups.end(), spec.group) == groups.end())
      groups.push_back(spec.group);
  }
  for (const std::string& group : groups) {
    po::options_description section(group);
    for (const Spec& spec : specs) {
      if (spec.group != group || (forHelp && spec.hidden)) continue;
      auto* value = po::value<std::string>();
      if (spec.flag) value->implicit_value("true");
      if (forHelp && !spec.shownDefault.empty()) value->default_value(spec.shownDefault);
      const std::string names = spec.letter ? spec.name + "," + spec.letter : spec.name;
      section.add_options()(names.c_str(), value, spec.help.c_str());
    }
    all.add(section);
  }
  return all;
}

// --help, and --config unless the program forwards it.
po::options_description genericOptions(const Program& program) {
  po::options_description generic;
  generic.add_options()("help,h", "print this help");
  if (!program.forwardsOthers) {
    generic.add_options()("config", po::value<std::string>(),
                          "read options from this file (`name = value` lines; the command line "
                          "and RINGTRAIN_* variables win)");
    generic.add_options()("print-config",
                          "print the options these sources give, as --config lines, and exit "
                          "(presets resolved: --model gpt2-124m prints its layers, width, ...)");
  }
  return generic;
}

// A forwarding program keeps what it does not name for another table; otherwise the positional
// options take the bare arguments, one each in the table's order.
po::parsed_options parsedCommandLine(const Program& program, const std::vector<Spec>& specs,
                                     int argc, const char* const* argv) {
  po::options_description options = genericOptions(program);
  options.add(describedOptions(specs, false));
  po::positional_options_description positional;
  for (const Spec& spec : specs) {
    if (spec.positional) positional.add(spec.name.c_str(), 1);
  }
  po::command_line_parser parser(argc, argv);
  parser.options(options);
  if (program.forwardsOthers)
    parser.allow_unregistered();
  else if (positional.max_total_count() > 0)
    parser.positional(positional);
  return parser.run();
}

std::optional<std::string> gatherCommandLine(const Program& program, const std::vector<Spec>& specs,
                                             int argc, const char* const* argv,
                                             Gathered& gathered) {
  try {
    const po::parsed_options parsed = parsedCommandLine(program, specs, argc, argv);
    if (program.forwardsOthers)
      gathered.rest = po::collect_unrecognized(parsed.options, po::include_positional);
    for (const po::option& option : parsed.options) {
      if (program.forwardsOthers && (option.unregistered || option.position_key >= 0)) continue;
      if (option.string_key == "help") {
        gathered.help = true;
        continue;
      }
      if (option.string_key == "print-config") {
        gathered.printConfig = true;
        continue;
      }
      const std::string text = option.value.empty() ? "true" : option.value.front();
      if (option.string_key == "config") {
        gathered.configFile = text;
        continue;
      }
      if (!gathered.given.emplace(option.string_key, Given{text, ""}).second)
        return fmt::format("--{} was given twice on the command line", option.string_key);
    }
  } catch (const po::error& e) {
    return std::string(e.what());
  }
  return std::nullopt;
}

std::vector<std::string>& registeredVariables() {
  static std::vector<std::string> names;
  return names;
}

void gatherEnvironment(const Program& program, const std::vector<Spec>& specs, Gathered& gathered) {
  std::map<std::string, std::string> names;  // variable -> option (agg_iters: RINGTRAIN_AGG_ITERS)
  for (const Spec& spec : specs) {
    if (!spec.hidden) names.emplace(variableNameOf(spec.name), spec.name);
  }
  const auto& quiet = registeredVariables();
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string_view variable(*entry);
    if (!variable.starts_with("RINGTRAIN_")) continue;
    const std::string key(variable.substr(0, variable.find('=')));
    const std::string value(variable.substr(std::min(variable.size(), key.size() + 1)));
    if (key == "RINGTRAIN_CONFIG") {
      // A forwarding program's --config is the other table's.
      if (gathered.configFile.empty() && !program.forwardsOthers) gathered.configFile = value;
    } else if (const auto option = names.find(key); option != names.end()) {
      gathered.given.emplace(option->second, variableGiven(key, value));
    } else if (std::find(quiet.begin(), quiet.end(), key) == quiet.end()) {
      gathered.warnings.push_back(unknownVariableWarning(key, program, specs));
    }
  }
}

// The --config file exists and is a regular file (a folder would be read as nothing, a FIFO
// would block for ever).
std::optional<std::string> configFileProblem(const std::string& path) {
  std::error_code error;
  if (!std::filesystem::exists(path, error))
    return "--config " + path + ": cannot open the file (no such file)";
  if (auto problem = base::regularFileProblem(path))
    return "--config " + path + ": " + *problem + "; expected a file of `name = value` lines";
  return std::nullopt;
}

std::optional<std::string> gatherConfigFile(const std::vector<Spec>& specs, Gathered& gathered) {
  const std::string& path = gathered.configFile;
  if (auto problem = configFileProblem(path)) return problem;
  std::ifstream file(path);
  if (!file) return "--config " + path + ": cannot open the file";
  std::map<std::string, int> firstLine;  // option -> the line that gave it
  std::string line;
  for (int number = 1; std::getline(file, line); ++number) {
    const std::string content = trimmed(line);
    if (content.empty() || content[0] == '#') continue;
    const std::string where =
        fmt::format("--config {} line {}: {}: ", path, number, excerpt(content));
    const std::size_t equals = content.find('=');
    if (equals == std::string::npos) return where + "expected `name = value`";
    const std::string name = trimmed(std::string_view(content).substr(0, equals));
    const std::string value = trimmed(std::string_view(content).substr(equals + 1));
    const auto spec = std::find_if(specs.begin(), specs.end(),
                                   [&](const Spec& s) { return s.name == name && !s.hidden; });
    if (spec == specs.end()) return where + "unrecognised option '" + excerpt(name) + "'";
    const auto [first, added] = firstLine.emplace(name, number);
    if (!added) return fmt::format("{}{} was given on line {} already", where, name, first->second);
    gathered.given.emplace(name, Given{value, where});  // the command line and variables win
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> gather(const Program& program, const std::vector<Spec>& specs, int argc,
                                  const char* const* argv, Gathered& gathered) {
  if (auto error = gatherCommandLine(program, specs, argc, argv, gathered)) return error;
  if (gathered.help) {
    po::options_description shown = genericOptions(program);
    shown.add(describedOptions(specs, true));
    std::ostringstream text;
    text << program.usage << "\n\n"
         << shown
         << "\nEvery option can also be set by a RINGTRAIN_* variable (--batch-size: "
            "RINGTRAIN_BATCH_SIZE) or a --config file line (batch-size = 64).\n"
            "Exit statuses and which options ranks must agree on: docs/options.md\n";
    gathered.helpText = text.str();
    return std::nullopt;
  }
  gatherEnvironment(program, specs, gathered);
  if (!gathered.configFile.empty()) return gatherConfigFile(specs, gathered);
  return std::nullopt;
}

void registerKnownVariables(const std::vector<std::string_view>& names) {
  for (std::string_view name : names)
    registeredVariables().emplace_back(name);
}

void registerProgramOptions(const std::vector<Spec>& specs) {
  for (const Spec& spec : specs)
    registeredVariables().push_back(variableNameOf(spec.name));
}

}  // namespace options
}  // namespace ringtrain
