// Progress lines: "[rank r/N host] message" on standard output, one write per line so that the
// lines of several ranks never interleave. Errors go to standard error (collectives::printLine).
#pragma once

#include <string_view>

#include "collectives/mpi_check.h"

namespace ringtrain {

inline void logLine(std::string_view message) {
  collectives::printLine(message, collectives::OutputStream::kStandardOutput);
}

}  // namespace ringtrain
