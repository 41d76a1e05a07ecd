// TensorBoard logs: event files TensorBoard reads, and a JSON-lines file beside them for scripts.
//
// An event file is a TFRecord file: records of
//   uint64 length, uint32 masked CRC-32C of the length's 8 bytes, `length` bytes of data,
//   uint32 masked CRC-32C of the data (all little-endian; see crc32c.h for the mask),
// each record's data one serialized Event protocol buffer (proto/tensorboard_event.proto, with
// TensorBoard's field numbers). The first event carries file_version "brain.Event:2"; each later
// one a Summary of scalar values (simple_value) at a step.
//
// TensorBoard treats every folder holding event files as a run: TrainingLog writes
// logdir/train/events.out.tfevents.<seconds>.<host> and logdir/test/..., so the training and the
// test curves of one tag ("loss") are drawn in one chart, one colour each. logdir/metrics.jsonl
// gets one line per write(): {"split":"train","step":100,"wall_time":...,"loss":0.31,...}.
//
// Records are flushed to the operating system after every write (TensorBoard reads files while
// they grow), not fsynced: a log lost in a crash costs a few points of a curve, and the resume
// marker (markResumed) makes TensorBoard drop the points the crashed run wrote past the
// checkpoint. One process writes a log folder (rank 0); not thread-safe.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <initializer_list>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace ringtrain::storage {

struct Scalar {
  std::string tag;  // "loss", "accuracy", "learning_rate", "samples_per_second", "allreduce_ms"
  double value = 0;
};

// Seconds since the Unix epoch, with microseconds: an event's wall_time.
double unixSeconds();

// One event file. Errors (a folder that cannot be created, a full disk) throw
// std::runtime_error with one line naming the file.
class EventFileWriter {
 public:
  // Creates `folder` if needed and a new file events.out.tfevents.<seconds>.<host> in it (with a
  // ".<n>" suffix should that name be taken), and writes the file-version event.
  explicit EventFileWriter(const std::filesystem::path& folder);
  ~EventFileWriter();
  EventFileWriter(const EventFileWriter&) = delete;
  EventFileWriter& operator=(const EventFileWriter&) = delete;

  // One event holding every scalar, at `step`.
  void writeScalars(std::int64_t step, std::span<const Scalar> scalars, double wallTime);
  // A SessionLog START event at `step` (see proto/tensorboard_event.proto).
  void writeSessionStart(std::int64_t step, double wallTime);

  const std::filesystem::path& path() const { return path_; }

 private:
  void writeRecord(const std::string& data);

  std::filesystem::path path_;
  std::FILE* file_ = nullptr;
};

// A log folder: an event file per split (subfolder) and metrics.jsonl.
class TrainingLog {
 public:
  // Creates logdir if needed. Nothing else is created before the first write.
  explicit TrainingLog(std::filesystem::path logdir);
  ~TrainingLog();
  TrainingLog(const TrainingLog&) = delete;
  TrainingLog& operator=(const TrainingLog&) = delete;

  // The scalars at `step` under `split` ("train", "test": letters, digits, '_' and '-'; anything
  // else is std::invalid_argument): one event in logdir/<split>/ and one line in metrics.jsonl.
  void write(std::string_view split, std::int64_t step, std::span<const Scalar> scalars);
  void write(std::string_view split, std::int64_t step, std::initializer_list<Scalar> scalars) {
    write(split, step, std::span<const Scalar>(scalars.begin(), scalars.size()));
  }
  // After resuming at `step`: a SessionLog START in every split written so far and in those
  // opened later, so TensorBoard forgets the crashed run's points from `step` on, and a line
  // {"resumed_at_step":step,...} in metrics.jsonl for scripts to do the same.
  void markResumed(std::int64_t step);

  const std::filesystem::path& logdir() const { return logdir_; }
  std::filesystem::path metricsPath() const { return logdir_ / "metrics.jsonl"; }

 private:
  EventFileWriter& writerFor(std::string_view split);
  void appendMetricsLine(const std::string& json);

  std::filesystem::path logdir_;
  std::map<std::string, std::unique_ptr<EventFileWriter>, std::less<>> writers_;
  std::FILE* metrics_ = nullptr;
  std::int64_t resumedAt_ = -1;
};

}  // namespace ringtrain::storage
