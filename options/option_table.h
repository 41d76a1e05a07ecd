// One declaration per option. A program lists its options once, in a table (name, help, default,
// range, whether ranks must agree on it); parsing, --help, --config files, RINGTRAIN_* variables,
// range errors that name where a value came from, the start-up comparison and the configuration
// saved in checkpoints are all derived from that table.
//
// Sources, in order of precedence: the command line, RINGTRAIN_* variables (RINGTRAIN_BATCH_SIZE=64
// is --batch-size 64), a --config file of `name = value` lines. Each option is read once, in the
// table's order, so an option may depend on one listed before it (--layers on --model).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "base/byte_size.h"
#include "base/named_values.h"

namespace ringtrain {

// "--hidden 512,256" and friends: comma-separated positive integers.
std::optional<std::vector<int>> parseIntList(const std::string& text);
// "512,256"
std::string intListText(const std::vector<int>& values);

namespace options {

// Whether every rank of a job must be given the same value. The start-up comparison checks
// kCompared values and, for kPresenceCompared, only whether the option was given (a folder that
// only rank 0 writes to may have another path elsewhere). kPerRank options may differ: paths read
// on each node, a rank's own log, or what only rank 0 acts on (docs/options.md lists them).
enum class Agreement { kCompared, kPresenceCompared, kPerRank };
inline constexpr NamedValue<Agreement> kAgreementNames[] = {
    {Agreement::kCompared, "compared"},
    {Agreement::kPresenceCompared, "compared (given or not)"},
    {Agreement::kPerRank, "per rank"}};

// The values a number may take. Open ends exclude the bound. `rule` replaces the generated
// wording ("must be at least 1"); `hint` follows it (" (0: off)").
struct Range {
  std::optional<double> min = std::nullopt;
  std::optional<double> max = std::nullopt;
  bool minOpen = false;
  bool maxOpen = false;
  std::string_view hint = {};
  std::string_view rule = {};
};
inline constexpr Range kAny{};
inline constexpr Range kNotNegative{.min = 0};
inline constexpr Range kPositive{.min = 1};

// "--batch-size must be at least 1 (got 0)", or nullopt when `value` is in `range`.
std::optional<std::string> rangeProblem(std::string_view option, double value,
                                        std::string_view valueText, const Range& range);

template <class Config>
struct Option {
  std::string name;   // without the dashes
  std::string group;  // its --help section
  std::string help;
  Agreement agreement = Agreement::kCompared;
  bool flag = false;        // a bare --name means true
  bool hidden = false;      // test hooks and removed options: parsed, not in --help or variables
  bool required = false;    // the program cannot run without it
  bool saved = false;       // part of the configuration a checkpoint keeps
  char letter = 0;          // a one-letter alias (-b for --minbytes, as nccl-tests'); 0: none
  bool positional = false;  // may also be given bare, in the table's order (export CKPT OUT)
  // The text into the configuration; the error names the option (never the source).
  std::function<std::optional<std::string>(Config&, const std::string&)> read;
  // The value's problem (out of its range), or nullopt; empty: any value is good.
  std::function<std::optional<std::string>(const Config&)> check;
  // The value as a --config file writes it, for the comparison and the saved configuration.
  std::function<std::string(const Config&)> write;
  // The value as --help shows it (empty: write).
  std::function<std::string(const Config&)> show;
  // Whether the option means anything for this configuration (empty: always).
  std::function<bool(const Config&)> applies;
  std::vector<std::string> choices;  // the names a choice or a boolean takes
};

template <class Config>
using Table = std::vector<Option<Config>>;

// What a program is called and how, for --help and the messages.
struct Program {
  std::string name;   // "train"
  std::string usage;  // "usage: mpirun -np N ringtrain train [options]"
  // Options the table does not name, bare arguments and --config are left, in order, in
  // Outcome::rest for another table (eval hands them to train's); the variables still count.
  bool forwardsOthers = false;
};

// An option's text and where it came from: "" for the command line, "RINGTRAIN_LR=x: " for a
// variable, "--config FILE line N: lr = x: " for a config file; errors start with it.
struct Given {
  std::string text;
  std::string where;
};

// What the sources said, before any value is read.
struct Gathered {
  std::map<std::string, Given> given;  // option name -> its text
  bool help = false;
  bool printConfig = false;  // --print-config
  std::string helpText;
  std::string configFile;             // --config, if given
  std::vector<std::string> warnings;  // RINGTRAIN_* variables that name no option
  std::vector<std::string> rest;      // the arguments forwarded (Program::forwardsOthers)
};

// About 60 characters of `text`, bytes that are not printable as \xNN: a value quoted in an error
// never floods the terminal.
std::string excerpt(std::string_view text);
// RINGTRAIN_NAME=value as an option's source, its `where` "RINGTRAIN_NAME=value: ".
Given variableGiven(std::string_view variable, std::string value);
// The variable of `option` (RINGTRAIN_BATCH_SIZE for batch-size) as a source, when set and not
// empty (a library's reading, which has no command line to name the options it ignores).
std::optional<Given> variableSet(std::string_view option);

// An option's face, without its configuration type.
struct Spec {
  std::string name;
  std::string group;
  std::string help;
  std::string shownDefault;  // "" : none shown
  bool flag = false;
  bool hidden = false;
  char letter = 0;
  bool positional = false;
};

// Collects the command line, the variables and the --config file. Returns the first error
// (an unknown option, an unreadable config file) as one line.
std::optional<std::string> gather(const Program& program, const std::vector<Spec>& specs, int argc,
                                  const char* const* argv, Gathered& gathered);

// RINGTRAIN_BATCH_SIZE -> batch-size.
std::string optionNameOf(std::string_view variable);
// batch-size -> RINGTRAIN_BATCH_SIZE.
std::string variableNameOf(std::string_view option);
// RINGTRAIN_* variables that name no option and are no misspelling either (the scripts', e.g.
// RINGTRAIN_RANKS): never warned about. The program registers them before parsing.
void registerKnownVariables(const std::vector<std::string_view>& names);
// The binary's programs share the RINGTRAIN_* variables: a variable naming an option of any program
// registered here is no misspelling in another. main.cc registers every program's table before
// parsing (the programs' libraries do not know each other).
void registerProgramOptions(const std::vector<Spec>& specs);

// What parsing gives beside the configuration. --print-config is a help whose text is the
// configuration read (configText).
struct Outcome {
  bool help = false;
  std::string helpText;
  std::string configFile;
  std::vector<std::string> warnings;
  std::vector<std::string> rest;  // the arguments forwarded (Program::forwardsOthers)
};

template <class Config>
std::vector<Spec> specsOf(const Table<Config>& table) {
  const Config defaults{};
  std::vector<Spec> specs;
  for (const Option<Config>& option : table) {
    const auto& shown = option.show ? option.show : option.write;
    specs.push_back({option.name, option.group, option.help,
                     option.required || !shown ? "" : shown(defaults), option.flag, option.hidden,
                     option.letter, option.positional});
  }
  return specs;
}

// `name = value` lines of every option that means something for `config` and has a value (not
// hidden, not empty): a --config file that gives the same configuration, for scripts to read.
template <class Config>
std::string configText(const Table<Config>& table, const Config& config) {
  std::string text;
  for (const Option<Config>& option : table) {
    if (option.hidden || (option.applies && !option.applies(config))) continue;
    const std::string value = option.write(config);
    if (!value.empty()) text += option.name + " = " + value + "\n";
  }
  return text;
}

// Parses argv (argv[0] is the program's word) into `config`: the first bad value's error as one
// line naming the option and where it came from, or nullopt.
template <class Config>
std::optional<std::string> parse(const Program& program, const Table<Config>& table, int argc,
                                 const char* const* argv, Config& config, Outcome& outcome) {
  Gathered gathered;
  if (auto error = gather(program, specsOf(table), argc, argv, gathered)) return error;
  outcome.help = gathered.help;
  outcome.helpText = gathered.helpText;
  outcome.configFile = gathered.configFile;
  outcome.warnings = gathered.warnings;
  outcome.rest = gathered.rest;
  if (gathered.help) return std::nullopt;
  for (const Option<Config>& option : table) {
    const auto found = gathered.given.find(option.name);
    if (found == gathered.given.end()) {
      if (option.required) return "--" + option.name + " is required";
      continue;
    }
    const Given& given = found->second;
    if (auto error = option.read(config, given.text)) return given.where + *error;
    if (option.check) {
      if (auto error = option.check(config)) return given.where + *error;
    }
  }
  if (gathered.printConfig) {
    outcome.help = true;
    outcome.helpText = configText(table, config);
  }
  return std::nullopt;
}

// A library's reading of `table`: each option's variable (variableSet) over `config`, in the
// table's order, read and checked as the programs read it; the first bad value's error.
template <class Config>
std::optional<std::string> readVariables(const Table<Config>& table, Config& config) {
  for (const Option<Config>& option : table) {
    const std::optional<Given> given = variableSet(option.name);
    if (!given) continue;
    if (auto error = option.read(config, given->text)) return given->where + *error;
    if (option.check) {
      if (auto error = option.check(config)) return given->where + *error;
    }
  }
  return std::nullopt;
}

// The first value out of its range, whoever set it.
template <class Config>
std::optional<std::string> checkRanges(const Table<Config>& table, const Config& config) {
  for (const Option<Config>& option : table) {
    if (!option.check) continue;
    if (auto error = option.check(config)) return error;
  }
  return std::nullopt;
}

// (--name, value) of each option every rank must agree on.
template <class Config>
std::vector<std::pair<std::string, std::string>> comparedItems(const Table<Config>& table,
                                                               const Config& config) {
  std::vector<std::pair<std::string, std::string>> items;
  for (const Option<Config>& option : table) {
    if (option.agreement == Agreement::kPerRank) continue;
    if (option.applies && !option.applies(config)) continue;
    std::string value = option.write(config);
    if (option.agreement == Agreement::kPresenceCompared)
      value = value.empty() ? "(not given)" : "(given)";
    items.emplace_back("--" + option.name, std::move(value));
  }
  return items;
}

// `name = value` lines of the options a checkpoint keeps.
template <class Config>
std::string savedLines(const Table<Config>& table, const Config& config) {
  std::string text;
  for (const Option<Config>& option : table) {
    if (!option.saved || (option.applies && !option.applies(config))) continue;
    text += option.name + " = " + option.write(config) + "\n";
  }
  return text;
}

// ---- Builders. `field` is a callable giving the value's reference in a Config: the table reads
// through it and (for write, check and show) reads a const Config through a const_cast, never
// writing there.

// A row's field: RINGTRAIN_FIELD(batchSize) reads and writes config.batchSize of whatever
// configuration the table is read into.
#define RINGTRAIN_FIELD(m)    \
  [](auto& config) -> auto& { \
    return config.m;          \
  }

template <class Config, class Field>
auto& fieldOf(const Config& config, const Field& field) {
  return field(const_cast<Config&>(config));
}

std::optional<std::string> readDouble(std::string_view option, const std::string& text,
                                      double& value);
std::optional<std::string> readInteger(std::string_view option, const std::string& text,
                                       std::int64_t min, std::uint64_t max, std::int64_t& value);
std::optional<std::string> readBool(std::string_view option, const std::string& text, bool& value,
                                    bool onOff);
std::string numberText(double value);

// A number (any integer type or double) in `range`; doubles must be finite.
template <class Config, class Field>
Option<Config> number(std::string name, Field field, Range range, std::string help) {
  using T = std::remove_reference_t<decltype(field(std::declval<Config&>()))>;
  Option<Config> option;
  option.name = name;
  option.help = std::move(help);
  option.read = [name, field](Config& c, const std::string& text) -> std::optional<std::string> {
    if constexpr (std::is_floating_point_v<T>) {
      double value = 0;
      if (auto error = readDouble(name, text, value)) return error;
      field(c) = static_cast<T>(value);
    } else {
      std::int64_t value = 0;
      const std::int64_t min =
          std::is_signed_v<T> ? std::int64_t(std::numeric_limits<T>::min()) : 0;
      const auto max = static_cast<std::uint64_t>(std::numeric_limits<T>::max());
      if (auto error = readInteger(name, text, min, max, value)) return error;
      field(c) = static_cast<T>(value);
    }
    return std::nullopt;
  };
  option.write = [field](const Config& c) {
    if constexpr (std::is_floating_point_v<T>)
      return numberText(fieldOf(c, field));
    else
      return std::to_string(fieldOf(c, field));
  };
  option.check = [name, field, range](const Config& c) -> std::optional<std::string> {
    const auto value = fieldOf(c, field);
    if constexpr (std::is_floating_point_v<T>) {
      if (!std::isfinite(value)) {
        const std::string_view rule =
            range.rule.empty() ? std::string_view("must be a finite number") : range.rule;
        return "--" + name + " " + std::string(rule) + " (got " + numberText(value) + ")" +
               std::string(range.hint);
      }
      return rangeProblem(name, value, numberText(value), range);
    } else {
      return rangeProblem(name, static_cast<double>(value), std::to_string(value), range);
    }
  };
  return option;
}

// true or false; every boolean option takes true/false, on/off, yes/no and 1/0, and a bare
// --name means true. `onOff`: written as on/off (--overlap) rather than true/false.
template <class Config, class Field>
Option<Config> boolean(std::string name, Field field, std::string help, bool onOff = false) {
  Option<Config> option;
  option.name = name;
  option.help = std::move(help);
  option.flag = true;
  option.choices =
      onOff ? std::vector<std::string>{"on", "off"} : std::vector<std::string>{"true", "false"};
  option.read = [name, field, onOff](Config& c, const std::string& text) {
    return readBool(name, text, field(c), onOff);
  };
  option.write = [field, onOff](const Config& c) -> std::string {
    const bool value = fieldOf(c, field);
    if (onOff) return value ? "on" : "off";
    return value ? "true" : "false";
  };
  return option;
}

// One of an enum's names (base/named_values.h).
template <class Config, class Field, class Names>
Option<Config> choice(std::string name, Field field, const Names& names, std::string help) {
  Option<Config> option;
  option.name = name;
  option.help = joinNames(names, " | ", " | ") + (help.empty() ? "" : ": " + help);
  for (const auto& entry : names)
    option.choices.emplace_back(entry.name);
  option.read = [name, field, &names](Config& c,
                                      const std::string& text) -> std::optional<std::string> {
    if (const auto value = valueIn(names, text)) {
      field(c) = *value;
      return std::nullopt;
    }
    return "--" + name + " '" + text + "': expected " + joinNames(names, ", ", " or ");
  };
  option.write = [field, &names](const Config& c) {
    return std::string(nameIn(names, fieldOf(c, field)));
  };
  return option;
}

// A size in bytes (64K, 8M), at least 1.
template <class Config, class Field>
Option<Config> byteSize(std::string name, Field field, std::string help) {
  Option<Config> option;
  option.name = name;
  option.help = std::move(help);
  option.read = [name, field](Config& c, const std::string& text) -> std::optional<std::string> {
    const auto bytes = parseByteSize(text);
    if (!bytes || *bytes == 0)
      return "--" + name + " '" + text + "': expected a size like 64K or 8M";
    field(c) = *bytes;
    return std::nullopt;
  };
  option.write = [field](const Config& c) { return std::to_string(fieldOf(c, field)); };
  option.show = [field](const Config& c) { return byteSizeText(fieldOf(c, field)); };
  return option;
}

// Text taken as it is: a path, a name.
template <class Config, class Field>
Option<Config> text(std::string name, Field field, std::string help) {
  Option<Config> option;
  option.name = name;
  option.help = std::move(help);
  option.read = [field](Config& c, const std::string& value) -> std::optional<std::string> {
    field(c) = value;
    return std::nullopt;
  };
  option.write = [field](const Config& c) { return std::string(fieldOf(c, field)); };
  return option;
}

// Comma-separated positive integers; `example` for the error ("512,512").
template <class Config, class Field>
Option<Config> intList(std::string name, Field field, std::string example, std::string help) {
  Option<Config> option;
  option.name = name;
  option.help = std::move(help);
  option.read = [name, field, example](Config& c,
                                       const std::string& value) -> std::optional<std::string> {
    const auto values = parseIntList(value);
    if (!values) return "--" + name + " '" + value + "': expected positive sizes like " + example;
    field(c) = *values;
    return std::nullopt;
  };
  option.write = [field](const Config& c) { return intListText(fieldOf(c, field)); };
  return option;
}

// Gives `option` its section, agreement and saving, for tables written one option a line.
template <class Config>
Option<Config> with(Option<Config> option, std::string group, Agreement agreement,
                    bool saved = false) {
  option.group = std::move(group);
  option.agreement = agreement;
  option.saved = saved;
  return option;
}

}  // namespace options
}  // namespace ringtrain
