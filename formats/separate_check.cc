#include "formats/separate_check.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "base/log.h"
#include "formats/format_error.h"

extern char** environ;

namespace ringtrain::formats {
namespace {

std::filesystem::path& checkProgram() {
  static std::filesystem::path program;
  return program;
}

// Waits for `child` up to `limit`; its wait status, or nullopt-like -1 on timeout (the child is
// then killed and reaped), or -2 when it cannot be waited for (reaped elsewhere).
int waitFor(pid_t child, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  auto pause = std::chrono::milliseconds(1);
  for (;;) {
    int status = 0;
    const pid_t done = ::waitpid(child, &status, WNOHANG);
    if (done == child) return status;
    if (done < 0 && errno != EINTR) return -2;
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(child, SIGKILL);
      while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
      }
      return -1;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
}

}  // namespace

void setFileCheckProgram(const std::filesystem::path& program) {
  checkProgram() = program;
}

void checkInSeparateProcess(std::string_view kind, const std::filesystem::path& file,
                            std::chrono::seconds limit) {
  const std::filesystem::path& program = checkProgram();
  if (program.empty()) return;
  const std::string programText = program.string();
  const std::string kindText(kind);
  const std::string fileText = file.string();
  std::vector<char*> argv = {const_cast<char*>(programText.c_str()), const_cast<char*>("check"),
                             const_cast<char*>(kindText.c_str()),
                             const_cast<char*>(fileText.c_str()), nullptr};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  for (const int fd : {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO}) {
    posix_spawn_file_actions_addopen(&actions, fd, "/dev/null",
                                     fd == STDIN_FILENO ? O_RDONLY : O_WRONLY, 0);
  }
  pid_t child = 0;
  const int started =
      ::posix_spawn(&child, programText.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (started != 0) {
    logLine(LogLevel::kWarn, "warning: " + fileText + ": could not start the separate check (" +
                                 programText + ": " + std::strerror(started) +
                                 "); reading it unprotected");
    return;
  }
  const int status = waitFor(child, limit);
  if (status == -1) {
    throw FormatError(fileText + ": reading it took over " + std::to_string(limit.count()) +
                      " s in a separate check process, which was killed: the file is corrupt, "
                      "forged or on a stalled file system");
  }
  if (status >= 0 && WIFSIGNALED(status)) {
    const int signal = WTERMSIG(status);
    const char* name = ::strsignal(signal);
    throw FormatError(fileText + ": reading it crashed a separate check process (signal " +
                      std::to_string(signal) + ", " + (name != nullptr ? name : "unknown") +
                      "): the file is corrupt or forged, and libhdf5 does not survive it ('" +
                      programText + " check " + kindText + " FILE' repeats the check)");
  }
}

}  // namespace ringtrain::formats
