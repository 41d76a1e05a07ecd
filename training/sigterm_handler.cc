#include "training/sigterm_handler.h"

#include <semaphore.h>
#include <signal.h>

#include <cerrno>
#include <chrono>
#include <stdexcept>

namespace ringtrain::training {
namespace {

// What the handler may touch: a lock-free atomic and a semaphore (sem_post is async-signal-safe;
// a condition variable is not), which wakes the timer thread.
std::atomic<bool> gReceived{false};
sem_t gSignalled;
std::atomic<bool> gInstalled{false};

void onSigterm(int) {
  if (!gReceived.exchange(true)) sem_post(&gSignalled);
}

}  // namespace

const std::atomic<bool>& SigtermHandler::received() {
  return gReceived;
}

SigtermHandler::SigtermHandler(double graceSeconds, std::function<void()> onGraceExpired)
    : graceSeconds_(graceSeconds), onGraceExpired_(std::move(onGraceExpired)) {
  if (gInstalled.exchange(true)) throw std::logic_error("SigtermHandler: one at a time");
  gReceived = false;
  sem_init(&gSignalled, 0, 0);
  timer_ = std::thread([this] { timerLoop(); });
  struct sigaction action {};
  action.sa_handler = onSigterm;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // a read or write the signal interrupts carries on
  sigaction(SIGTERM, &action, nullptr);
}

SigtermHandler::~SigtermHandler() {
  struct sigaction action {};
  action.sa_handler = SIG_DFL;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  sem_post(&gSignalled);  // wakes the timer should no SIGTERM have come
  timer_.join();
  sem_destroy(&gSignalled);
  gInstalled = false;
}

void SigtermHandler::timerLoop() {
  while (sem_wait(&gSignalled) != 0 && errno == EINTR) {
  }
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(graceSeconds_));
  bool expired = false;
  {
    std::unique_lock lock(mutex_);
    expired = !wake_.wait_until(lock, deadline, [this] { return stopping_; });
  }
  if (expired) onGraceExpired_();
}

}  // namespace ringtrain::training
