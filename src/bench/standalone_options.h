// The command line of the stand-alone benchmark programs (allreduce_perf, model_step_perf,
// hdf5_read_perf, product_perf), read by their option tables.
#pragma once

#include <iostream>
#include <optional>
#include <string>
#include <utility>

#include "options/option_table.h"

namespace ringtrain::bench {

// `rows`, each in --help's section `group`.
template <class Config>
options::Table<Config> inGroup(const std::string& group, options::Table<Config> rows) {
  for (options::Option<Config>& row : rows)
    row.group = group;
  return rows;
}

// A number in no range of the table's: the program judges it after reading, in its own words.
template <class Config, class Field>
options::Option<Config> anyNumber(std::string name, Field field, std::string help) {
  return options::number<Config>(std::move(name), field, options::kAny, std::move(help));
}

// `option` under its nccl-tests-style letter too (-b for --batch).
template <class Config>
options::Option<Config> lettered(char letter, options::Option<Config> option) {
  option.letter = letter;
  return option;
}

// A boolean that always takes its value (-z 1, --ftz 0), as Boost's bool options did: a bare
// flag would leave the 1 or 0 behind as a stray argument.
template <class Config>
options::Option<Config> valued(options::Option<Config> option) {
  option.flag = false;
  return option;
}

// Parses argv into `config` by `table`; with --help, prints the help on stdout and sets `help`.
// Returns the first error, one line naming the option. The variables' warnings are not shown: a
// program apart from `ringtrain` cannot know its programs' and the scripts' RINGTRAIN_* names.
template <class Config>
std::optional<std::string> parseStandalone(const options::Program& program,
                                           const options::Table<Config>& table, int argc,
                                           char** argv, Config& config, bool& help) {
  options::Outcome outcome;
  auto error = options::parse(program, table, argc, argv, config, outcome);
  help = outcome.help;
  if (help) std::cout << outcome.helpText;
  return error;
}

}  // namespace ringtrain::bench
