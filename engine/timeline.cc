#include "engine/timeline.h"

#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <sstream>
#include <stdexcept>

#include "collectives/mpi_check.h"

namespace ringtrain::engine {
namespace {

std::string jsonEscape(std::string_view text) {
  std::string out;
  for (const char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

Timeline::Timeline(std::string path, MPI_Comm comm, std::string host)
    : path_(std::move(path)), comm_(comm), host_(std::move(host)) {
  RINGTRAIN_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  RINGTRAIN_MPI_CHECK(MPI_Comm_size(comm_, &size_));
  partPath_ = path_ + ".rank" + std::to_string(rank_) + ".part";
  part_.open(partPath_, std::ios::trunc);
  if (!part_) throw std::runtime_error("--timeline " + path_ + ": cannot write " + partPath_);
  RINGTRAIN_MPI_CHECK(MPI_Barrier(comm_));
  originNs_ = steadyNowNs();
  writer_ = std::thread([this] { writerLoop(); });
}

Timeline::~Timeline() {
  {
    const std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (writer_.joinable()) writer_.join();
  if (!finished_) {
    part_.close();  // the part file stays behind for inspection
  }
}

int Timeline::threadIndex(std::string_view category) {
  // Small, stable indices per thread; the first category a thread records names its row.
  thread_local const Timeline* owner = nullptr;
  thread_local int index = -1;
  if (owner != this) {
    owner = this;
    index = static_cast<int>(threadNames_.size());
    threadNames_.push_back(category == "all-reduce" ? "communication" : "training");
  }
  return index;
}

void Timeline::span(std::string_view name, std::string_view category, std::int64_t startNs,
                    std::int64_t endNs, std::int64_t bytes, std::string_view backend) {
  const std::lock_guard lock(mutex_);
  pending_.push_back({name, category, startNs, endNs, bytes, backend, threadIndex(category), {}});
}

void Timeline::counters(std::string_view name, std::int64_t atNs,
                        std::span<const CounterValue> values) {
  const std::lock_guard lock(mutex_);
  pending_.push_back({name,
                      "counter",
                      atNs,
                      atNs,
                      -1,
                      {},
                      threadIndex("counter"),
                      std::vector<CounterValue>(values.begin(), values.end())});
}

void Timeline::writerLoop() {
  std::vector<Event> batch;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      wake_.wait_for(lock, std::chrono::milliseconds(100), [&] { return stopping_; });
      batch.swap(pending_);
      if (stopping_ && batch.empty()) return;
    }
    write(batch);
    batch.clear();
  }
}

// A counter sample's JSON: {"name":..,"ph":"C",..,"args":{"series":value,...}}.
std::string Timeline::counterJson(const Event& e) const {
  std::string args;
  for (const CounterValue& v : e.values)
    args += fmt::format(R"({}"{}":{:.6g})", args.empty() ? "" : ",", jsonEscape(v.name), v.value);
  return fmt::format(
      R"({{"name":"{}","cat":"{}","ph":"C","pid":{},"tid":{},"ts":{:.3f},"args":{{{}}}}})",
      jsonEscape(e.name), jsonEscape(e.category), rank_, e.thread,
      static_cast<double>(e.start - originNs_) * 1e-3, args);
}

void Timeline::write(const std::vector<Event>& events) {
  std::string text;
  for (const Event& e : events) {
    text += firstEvent_ ? "" : ",\n";
    firstEvent_ = false;
    if (!e.values.empty()) {
      text += counterJson(e);
      continue;
    }
    text += fmt::format(
        R"({{"name":"{}","cat":"{}","ph":"X","pid":{},"tid":{},"ts":{:.3f},"dur":{:.3f})",
        jsonEscape(e.name), jsonEscape(e.category), rank_, e.thread,
        static_cast<double>(e.start - originNs_) * 1e-3,
        static_cast<double>(e.end - e.start) * 1e-3);
    if (e.bytes >= 0 && !e.backend.empty()) {
      text +=
          fmt::format(R"(,"args":{{"bytes":{},"backend":"{}"}})", e.bytes, jsonEscape(e.backend));
    } else if (e.bytes >= 0) {
      text += fmt::format(R"(,"args":{{"bytes":{}}})", e.bytes);
    }
    text += "}";
  }
  part_ << text;
  part_.flush();
}

void Timeline::finish() {
  {
    const std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (writer_.joinable()) writer_.join();
  // Row names for this rank.
  std::string meta = fmt::format(
      R"j({{"name":"process_name","ph":"M","pid":{},"args":{{"name":"rank {} ({})"}}}})j", rank_,
      rank_, jsonEscape(host_));
  for (std::size_t t = 0; t < threadNames_.size(); ++t) {
    meta += fmt::format(
        R"j(,{{"name":"thread_name","ph":"M","pid":{},"tid":{},"args":{{"name":"{}"}}}})j", rank_,
        t, threadNames_[t]);
  }
  part_ << (firstEvent_ ? "" : ",\n") << meta;
  part_.close();
  finished_ = true;

  std::string mine;
  {
    std::ifstream in(partPath_);
    std::stringstream buffer;
    buffer << in.rdbuf();
    mine = buffer.str();
  }
  std::filesystem::remove(partPath_);
  // Rank 0 collects every rank's events, size first, and writes the trace.
  long long length = static_cast<long long>(mine.size());
  if (rank_ != 0) {
    RINGTRAIN_MPI_CHECK(MPI_Send(&length, 1, MPI_LONG_LONG, 0, 0, comm_));
    for (long long sent = 0; sent < length; sent += 1 << 30) {
      const int n = static_cast<int>(std::min<long long>(1 << 30, length - sent));
      RINGTRAIN_MPI_CHECK(MPI_Send(mine.data() + sent, n, MPI_CHAR, 0, 1, comm_));
    }
    return;
  }
  std::ofstream out(path_, std::ios::trunc);
  out << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n" << mine;
  for (int r = 1; r < size_; ++r) {
    long long other = 0;
    RINGTRAIN_MPI_CHECK(MPI_Recv(&other, 1, MPI_LONG_LONG, r, 0, comm_, MPI_STATUS_IGNORE));
    std::string text(static_cast<std::size_t>(other), '\0');
    for (long long got = 0; got < other; got += 1 << 30) {
      const int n = static_cast<int>(std::min<long long>(1 << 30, other - got));
      RINGTRAIN_MPI_CHECK(MPI_Recv(text.data() + got, n, MPI_CHAR, r, 1, comm_, MPI_STATUS_IGNORE));
    }
    out << ",\n" << text;
  }
  out << "\n]}\n";
  if (!out) logLine(LogLevel::kWarn, "warning: could not write the timeline " + path_);
}

}  // namespace ringtrain::engine
