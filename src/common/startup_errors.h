// Start-up errors that every rank must act on together.
#pragma once

#include <optional>
#include <string>

namespace ringtrain {

// Called by every rank with its own verdict on the command line and inputs (nullopt when fine).
// When any rank has an error, the lowest such rank prints it as one line with its rank label,
// every rank finalises MPI and exits with `exitCode`: nobody is left waiting in a collective and
// the user reads the cause once, not once per rank.
void exitEverywhereOnError(const std::optional<std::string>& error, int exitCode = 2);

}  // namespace ringtrain
