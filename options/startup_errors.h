// Start-up errors that every rank must act on together.
#pragma once

#include <exception>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "base/exit_status.h"

namespace ringtrain::options {

// Called by every rank with its own verdict on the command line and inputs (nullopt when fine).
// When any rank has an error, the lowest such rank prints it as one line with its rank label,
// every rank finalises MPI and exits with `exitCode`: nobody is left waiting in a collective and
// the user reads the cause once, not once per rank.
void exitEverywhereOnError(const std::optional<std::string>& error, int exitCode = kExitBadInput);

// Rank 0 logs each of parsing's warnings once (RINGTRAIN_* variables that name no option).
void warnOnRankZero(const std::vector<std::string>& warnings, int rank);

// A command's options, parsed on every rank by `parse(config, help, helpText)`, which returns
// the first bad option's error or nullopt. A bad option (or a throw) ends the job on every rank
// as above; after --help rank 0 prints the help and every rank gets nullopt.
template <class Config, class Parse>
std::optional<Config> parseOnEveryRank(const Parse& parse, int rank) {
  Config config;
  bool help = false;
  std::string helpText;
  std::optional<std::string> error;
  try {
    error = parse(config, help, helpText);
  } catch (const std::exception& e) {
    error = e.what();
  }
  exitEverywhereOnError(error);
  if (!help) return config;
  if (rank == 0) std::cout << helpText;
  return std::nullopt;
}

}  // namespace ringtrain::options
