// SigtermHandler: a SIGTERM sets the flag instead of killing the process, the grace timer fires
// only after a signal and only when the handler is still alive, and the default action returns
// when the handler goes.
#include "training/sigterm_handler.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace ringtrain::training {
namespace {

using namespace std::chrono_literals;

TEST(SigtermHandlerTest, ASigtermSetsTheFlagAndTheProcessLivesOn) {
  std::atomic<int> expired{0};
  SigtermHandler handler(60, [&] { ++expired; });
  EXPECT_FALSE(SigtermHandler::received());
  ASSERT_EQ(raise(SIGTERM), 0);
  EXPECT_TRUE(SigtermHandler::received());
  ASSERT_EQ(raise(SIGTERM), 0);  // a second one changes nothing
  EXPECT_EQ(expired, 0);
}

TEST(SigtermHandlerTest, TheGraceTimerFiresGraceSecondsAfterTheSignal) {
  std::atomic<int> expired{0};
  SigtermHandler handler(0.2, [&] { ++expired; });
  std::this_thread::sleep_for(400ms);
  EXPECT_EQ(expired, 0) << "no signal, no timer";
  const auto sent = std::chrono::steady_clock::now();
  ASSERT_EQ(raise(SIGTERM), 0);
  while (expired == 0 && std::chrono::steady_clock::now() - sent < 5s)
    std::this_thread::sleep_for(10ms);
  const auto waited = std::chrono::steady_clock::now() - sent;
  EXPECT_EQ(expired, 1);
  EXPECT_GE(waited, 190ms);
  EXPECT_LT(waited, 3s);
}

TEST(SigtermHandlerTest, AHandlerThatGoesInTimeCancelsTheTimer) {
  std::atomic<int> expired{0};
  {
    SigtermHandler handler(0.3, [&] { ++expired; });
    ASSERT_EQ(raise(SIGTERM), 0);
  }
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(expired, 0);
}

TEST(SigtermHandlerTest, WithoutAHandlerSigtermKillsAgain) {
  {
    SigtermHandler handler(60, [] {});
  }
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    raise(SIGTERM);
    _exit(0);  // reached only if SIGTERM were still caught
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << "status " << status;
}

}  // namespace
}  // namespace ringtrain::training
