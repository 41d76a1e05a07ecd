#include "storage/tensorboard_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <system_error>
#include <utility>

#include "formats/crc32c.h"
#include "tensorboard_event.pb.h"

namespace ringtrain::storage {
namespace {

namespace fs = std::filesystem;
using formats::crc32c;
using formats::maskCrc32c;

constexpr const char* kFileVersion = "brain.Event:2";

[[noreturn]] void failErrno(const fs::path& path, const std::string& what) {
  throw std::runtime_error(path.string() + ": " + what + ": " + std::strerror(errno));
}

std::string hostName() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

void appendLe(std::string& out, std::uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i)
    out.push_back(static_cast<char>(value >> (8 * i)));
}

// Opens a new file for appending; O_EXCL, so two writers never share one.
std::FILE* createNew(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return nullptr;
  std::FILE* file = ::fdopen(fd, "ab");
  if (!file) ::close(fd);
  return file;
}

void createFolder(const fs::path& folder) {
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec) throw std::runtime_error(folder.string() + ": cannot create the folder: " + ec.message());
}

void flushOrFail(std::FILE* file, const fs::path& path) {
  if (std::fflush(file) != 0) failErrno(path, "write failed");
}

bool validSplit(std::string_view split) {
  if (split.empty()) return false;
  for (const char c : split) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

double unixSeconds() {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  return static_cast<double>(std::chrono::duration_cast<std::chrono::microseconds>(now).count()) /
         1e6;
}

// ---- EventFileWriter ----------------------------------------------------------------------------

EventFileWriter::EventFileWriter(const fs::path& folder) {
  createFolder(folder);
  const double now = unixSeconds();
  const std::string base =
      "events.out.tfevents." + std::to_string(static_cast<std::int64_t>(now)) + "." + hostName();
  // A second writer in the same folder within the same second (a quick restart) gets ".1".
  for (int attempt = 0; !file_; ++attempt) {
    path_ = folder / (attempt == 0 ? base : base + "." + std::to_string(attempt));
    file_ = createNew(path_);
    if (!file_ && (errno != EEXIST || attempt == 100)) failErrno(path_, "cannot create");
  }
  tensorboard::Event event;
  event.set_wall_time(now);
  event.set_file_version(kFileVersion);
  event.mutable_source_metadata()->set_writer("ringtrain");
  writeRecord(event.SerializeAsString());
}

EventFileWriter::~EventFileWriter() {
  if (file_) std::fclose(file_);
}

void EventFileWriter::writeRecord(const std::string& data) {
  std::string record;
  record.reserve(data.size() + 16);
  appendLe(record, data.size(), 8);
  appendLe(record, maskCrc32c(crc32c(std::string_view(record.data(), 8))), 4);
  record += data;
  appendLe(record, maskCrc32c(crc32c(data)), 4);
  if (std::fwrite(record.data(), 1, record.size(), file_) != record.size()) {
    failErrno(path_, "write failed");
  }
  flushOrFail(file_, path_);
}

void EventFileWriter::writeScalars(std::int64_t step, std::span<const Scalar> scalars,
                                   double wallTime) {
  tensorboard::Event event;
  event.set_wall_time(wallTime);
  event.set_step(step);
  tensorboard::Summary* summary = event.mutable_summary();
  for (const Scalar& scalar : scalars) {
    tensorboard::Summary::Value* value = summary->add_value();
    value->set_tag(scalar.tag);
    value->set_simple_value(static_cast<float>(scalar.value));
  }
  writeRecord(event.SerializeAsString());
}

void EventFileWriter::writeSessionStart(std::int64_t step, double wallTime) {
  tensorboard::Event event;
  event.set_wall_time(wallTime);
  event.set_step(step);
  event.mutable_session_log()->set_status(tensorboard::SessionLog::START);
  writeRecord(event.SerializeAsString());
}

// ---- TrainingLog --------------------------------------------------------------------------------

TrainingLog::TrainingLog(fs::path logdir) : logdir_(std::move(logdir)) {
  createFolder(logdir_);
}

TrainingLog::~TrainingLog() {
  if (metrics_) std::fclose(metrics_);
}

EventFileWriter& TrainingLog::writerFor(std::string_view split) {
  if (!validSplit(split)) {
    throw std::invalid_argument("TrainingLog: split '" + std::string(split) +
                                "' is not a folder name of letters, digits, '_' and '-'");
  }
  auto found = writers_.find(split);
  if (found == writers_.end()) {
    auto writer = std::make_unique<EventFileWriter>(logdir_ / std::string(split));
    if (resumedAt_ >= 0) writer->writeSessionStart(resumedAt_, unixSeconds());
    found = writers_.emplace(std::string(split), std::move(writer)).first;
  }
  return *found->second;
}

void TrainingLog::write(std::string_view split, std::int64_t step,
                        std::span<const Scalar> scalars) {
  const double now = unixSeconds();
  writerFor(split).writeScalars(step, scalars, now);
  nlohmann::ordered_json line;
  line["split"] = split;
  line["step"] = step;
  line["wall_time"] = now;
  for (const Scalar& scalar : scalars)
    line[scalar.tag] = scalar.value;  // NaN and infinity become null
  appendMetricsLine(line.dump());
}

void TrainingLog::appendMetricsLine(const std::string& json) {
  if (!metrics_) {
    metrics_ = std::fopen(metricsPath().c_str(), "ab");
    if (!metrics_) failErrno(metricsPath(), "cannot open");
  }
  const std::string text = json + "\n";
  if (std::fwrite(text.data(), 1, text.size(), metrics_) != text.size()) {
    failErrno(metricsPath(), "write failed");
  }
  flushOrFail(metrics_, metricsPath());
}

void TrainingLog::markResumed(std::int64_t step) {
  resumedAt_ = step;
  const double now = unixSeconds();
  for (auto& [split, writer] : writers_)
    writer->writeSessionStart(step, now);
  nlohmann::ordered_json line;
  line["resumed_at_step"] = step;
  line["wall_time"] = now;
  appendMetricsLine(line.dump());
}

}  // namespace ringtrain::storage
