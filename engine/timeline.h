// Timeline: a Chrome trace of every rank (open it in https://ui.perfetto.dev or chrome://tracing).
//
// Spans are recorded in memory (a vector behind a short lock) and a writer thread streams them
// to a part file of this rank every 100 ms, so the training step pays a clock read and a
// push_back per span. finish() is collective: rank 0 gathers every rank's events over MPI (no
// shared file system needed) and writes one trace with a process per rank and a thread per
// worker (training, communication). Times are microseconds since a barrier at construction, so
// the ranks' rows line up.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <fstream>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <mpi.h>

#include "base/trace_sink.h"

namespace ringtrain::engine {

class Timeline final : public TraceSink {
 public:
  // Collective over `comm`. Throws std::runtime_error naming the file when it cannot be written.
  Timeline(std::string path, MPI_Comm comm, std::string host);
  ~Timeline() override;
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  void span(std::string_view name, std::string_view category, std::int64_t startNs,
            std::int64_t endNs, std::int64_t bytes = -1, std::string_view backend = {}) override;
  // One sample of named values at `atNs` (Chrome's counter event: a track per name, a series per
  // value). The names must outlive the timeline (string literals, static tables).
  struct CounterValue {
    std::string_view name;
    double value;
  };
  void counters(std::string_view name, std::int64_t atNs, std::span<const CounterValue> values);
  // Collective over the constructor's `comm`: flushes and, on rank 0, writes the merged trace.
  void finish();
  const std::string& path() const { return path_; }

 private:
  struct Event {
    std::string_view name;
    std::string_view category;
    std::int64_t start;
    std::int64_t end;
    std::int64_t bytes;
    std::string_view backend;
    int thread;
    std::vector<CounterValue> values;  // a counter sample's; empty for a span
  };
  int threadIndex(std::string_view category);
  void writerLoop();
  void write(const std::vector<Event>& events);
  std::string counterJson(const Event& e) const;

  std::string path_;
  std::string partPath_;
  MPI_Comm comm_;
  int rank_ = 0;
  int size_ = 1;
  std::string host_;
  std::int64_t originNs_ = 0;
  std::ofstream part_;
  bool firstEvent_ = true;

  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<Event> pending_;
  std::vector<std::string> threadNames_;  // by thread index
  bool stopping_ = false;
  bool finished_ = false;
  std::thread writer_;
};

}  // namespace ringtrain::engine
