#include "base/log.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <system_error>

namespace ringtrain {
namespace {

std::string& label() {
  static std::string value = [] {
    char host[256] = {};
    ::gethostname(host, sizeof(host) - 1);
    return "[rank ?/? " + std::string(host) + "]";
  }();
  return value;
}

std::atomic<int> processRank{0};
std::atomic<LogLevel> level{LogLevel::kInfo};
std::atomic<int> fileDescriptor{-1};

void writeAll(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t written = ::write(fd, text.data(), text.size());
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return;
    text.remove_prefix(static_cast<std::size_t>(written));
  }
}

// "2026-11-26T05:39:14.123Z".
std::string utcTimestamp() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  const auto millis =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm utc{};
  ::gmtime_r(&seconds, &utc);
  char text[64];
  const std::size_t length = std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%S", &utc);
  std::snprintf(text + length, sizeof(text) - length, ".%03dZ", static_cast<int>(millis));
  return text;
}

}  // namespace

const std::string& processLabel() {
  return label();
}

void setProcessLabel(int rank, int size, std::string_view host) {
  label() =
      "[rank " + std::to_string(rank) + "/" + std::to_string(size) + " " + std::string(host) + "]";
  processRank.store(rank);
}

void setLogLevel(LogLevel value) {
  level.store(value);
}

bool logs(LogLevel value) {
  return value <= level.load(std::memory_order_relaxed);
}

std::optional<std::string> logPatternProblem(std::string_view pattern) {
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%') continue;
    if (i + 1 < pattern.size() && std::strchr("rh%", pattern[i + 1]) != nullptr) {
      ++i;
      continue;
    }
    const std::string found = i + 1 < pattern.size() ? std::string(pattern.substr(i, 2)) : "%";
    return "--log-file '" + std::string(pattern) + "': " + found +
           " is no placeholder (%r the rank, %h the host, %% a percent sign)";
  }
  return std::nullopt;
}

std::string expandLogPattern(std::string_view pattern, int rank, std::string_view host) {
  std::string path;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%' || i + 1 == pattern.size()) {
      path += pattern[i];
      continue;
    }
    switch (const char what = pattern[++i]) {
      case 'r':
        path += std::to_string(rank);
        break;
      case 'h':
        path += host;
        break;
      default:
        path += what;
    }
  }
  return path;
}

std::optional<std::string> openLogFile(std::string_view pattern, int rank, int size,
                                       std::string_view host) {
  if (auto problem = logPatternProblem(pattern)) return problem;
  if (size > 1 && expandLogPattern(pattern, 0, host) == expandLogPattern(pattern, 1, host)) {
    return "--log-file '" + std::string(pattern) + "' names one file for " + std::to_string(size) +
           " ranks: put %r (the rank) in it, e.g. train-%r.log";
  }
  const std::string path = expandLogPattern(pattern, rank, host);
  const std::filesystem::path folder = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!folder.empty()) std::filesystem::create_directories(folder, ec);
  if (ec) return "--log-file " + path + ": cannot create the folder: " + ec.message();
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return "--log-file " + path + ": cannot open for writing: " + std::strerror(errno);
  const int previous = fileDescriptor.exchange(fd);
  if (previous >= 0) ::close(previous);
  return std::nullopt;
}

void logLine(LogLevel value, std::string_view message) {
  if (!logs(value)) return;
  std::string line = label();
  line += ' ';
  line += message;
  line += '\n';
  const int file = fileDescriptor.load(std::memory_order_relaxed);
  if (file >= 0) writeAll(file, utcTimestamp() + ' ' + line);
  if (file < 0 || value == LogLevel::kError || processRank.load(std::memory_order_relaxed) == 0) {
    writeAll(value <= LogLevel::kWarn ? STDERR_FILENO : STDOUT_FILENO, line);
  }
}

}  // namespace ringtrain
