// Every line ringtrain prints: "[rank r/N host] message", at a level that --log-level filters.
// Without a log file, errors and warnings go to standard error and the rest to standard output,
// from every rank. With a log file (--log-file, one per rank), each rank's file gets its lines at
// the level with an ISO-8601 UTC time stamp; the terminal keeps rank 0's lines and every rank's
// errors. Each line is one write(2): lines of ranks and threads never interleave mid-line, and a
// line written before an abort is in the file.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "base/named_values.h"

namespace ringtrain {

// Each level shows the ones before it: error shows errors only, debug everything.
enum class LogLevel { kError, kWarn, kInfo, kDebug };
inline constexpr NamedValue<LogLevel> kLogLevelNames[] = {{LogLevel::kError, "error"},
                                                          {LogLevel::kWarn, "warn"},
                                                          {LogLevel::kInfo, "info"},
                                                          {LogLevel::kDebug, "debug"}};

// "[rank r/N host]": the prefix of every line this process prints. MpiEnvironment sets it; before
// that it reads "[rank ?/? host]" and the process counts as rank 0.
const std::string& processLabel();
void setProcessLabel(int rank, int size, std::string_view host);

void setLogLevel(LogLevel level);
// Whether a line of this level is shown (errors always are).
bool logs(LogLevel level);

// The problem with a --log-file pattern (a '%' not followed by r, h or %), or nullopt.
std::optional<std::string> logPatternProblem(std::string_view pattern);
// The pattern with %r replaced by the rank, %h by the host, %% by '%'. The pattern must be good.
std::string expandLogPattern(std::string_view pattern, int rank, std::string_view host);
// Opens this rank's file of `pattern` for appending (its folder created), from now on the
// destination of this process's lines. Returns the error as one line naming --log-file and the
// path, or nullopt. A pattern without %r is refused for more than one rank: they would share a
// file.
std::optional<std::string> openLogFile(std::string_view pattern, int rank, int size,
                                       std::string_view host);

// Writes "<label> <message>" where the level says, when it is shown.
void logLine(LogLevel level, std::string_view message);

}  // namespace ringtrain
