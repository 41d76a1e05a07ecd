// Checkpoints: what a training run needs to continue, in one HDF5 file per checkpoint, written so
// that a crash at any moment leaves the previous checkpoint usable.
//
// A checkpoint file, ckpt-<step, 8 digits or more>.h5, is a 512-byte header followed by an HDF5
// file (the header sits in HDF5's "user block", so h5dump and h5py read the file as it is):
//
//   header   "ringtrain-ckpt" magic, format version, the HDF5 part's length and CRC-32C, the step,
//            and a CRC-32C of the header itself. The HDF5 part's CRC covers every byte of it --
//            parameters, optimiser state, counters and texts -- so a flipped bit anywhere, a
//            truncated copy or a half-written file is caught before HDF5 parses a byte of it.
//   /parameters/<name>   float32, one dataset per parameter tensor, named and shaped as the
//                        model's parameter table says ("fc1.weight", 512 x 784)
//   /optimizer/<name>    float32, the optimiser's state buffers ("momentum"; "exp_avg",
//                        "exp_avg_sq"), each the length of the flat parameter buffer;
//                        attributes kind (sgd, adam, adamw) and steps (Adam's bias correction)
//   /parameter_names, /optimizer_state_names
//                        string: the names of the tensors of /parameters and /optimizer, in
//                        order, each followed by a newline. The reader opens the tensors by these
//                        names and never lists a group itself (see memberNames in
//                        checkpoint_hdf5.cc: a libhdf5 1.10 bug made that unsafe on a forged
//                        file). Added in version 2.
//   /rng_state           uint64, any random-generator words the caller keeps (may be empty)
//   /config              string: the run's configuration, one "name = value" line per option
//   /model_layout        string: Model::describe(), compared on resume
//   root attributes      format, format_version, step, epoch, sampler_epoch, sampler_step,
//                        seed, world_size, batch_size, created (Unix seconds)
//
// Writing (rank 0): the file is built in memory, written to a hidden temporary name in the same
// folder, fsynced, renamed to ckpt-<step>.h5, the folder fsynced; then the small text file
// `latest` (the checkpoint's file name) is replaced the same way; only then are the writer's own
// checkpoints beyond `keep` removed (never another run's, nor the one a run resumed from: nothing
// saved before the run is lost). Whatever moment a crash hits, every ckpt-*.h5 in the folder is
// complete (a rename is atomic), and the newest one is at most one step old.
//
// Reading: every problem is a CheckpointError, one line naming the file: not a checkpoint,
// truncated, trailing bytes, checksum mismatch, another format version, another model layout,
// a missing or malformed entry. Resuming "auto" takes the newest checkpoint that reads cleanly
// and that the run can continue from (by step, so also one that `latest` does not name yet
// because the writer died between the two renames) and lists the ones it skipped and why.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "data/sharded_sampler.h"
#include "formats/format_error.h"

namespace ringtrain::storage {

// A bad checkpoint or checkpoint folder: one line naming the file. A formats::FormatError, as
// data::DataError is, so a handler for bad input catches both.
class CheckpointError : public formats::FormatError {
 public:
  using formats::FormatError::FormatError;
};

// One named float32 tensor: a parameter ("fc1.weight", {512, 784}) or an optimiser state buffer.
// Names are HDF5 link names: not empty, not ".", without '/' or a newline.
struct Tensor {
  std::string name;
  std::vector<std::int64_t> shape;  // C order; the product is values.size()
  std::vector<float> values;
};

struct CheckpointContent {
  std::int64_t step = 0;          // optimiser steps completed: training resumes with step `step`
  std::int64_t epoch = 0;         // the epoch that step belongs to
  data::SamplerPosition sampler;  // the position of the next batch (ShardedSampler::position())
  std::uint64_t seed = 0;
  std::vector<std::uint64_t> rngState;  // further generator words, if the caller has any
  int worldSize = 1;                    // ranks of the run that wrote it
  std::int64_t batchSize = 0;           // per rank, of the run that wrote it
  std::string optimizerKind;            // "sgd", "adam", "adamw"
  std::int64_t optimizerSteps = 0;      // Optimizer::steps()
  std::string config;                   // the configuration as text (describe(config))
  std::string modelLayout;              // Model::describe()
  std::vector<Tensor> parameters;       // in the parameter table's order
  std::vector<Tensor> optimizerState;   // Optimizer::state(), named
};

// Test-only: where writeCheckpoint kills its own process (SIGKILL: no destructor, no flush), to
// check that every stage of a write leaves a resumable folder.
enum class CrashPoint {
  kNone,
  kDuringTemporaryWrite,  // half the checkpoint written to the temporary file
  kBeforeRename,          // temporary file complete and synced, not yet renamed
  kBeforeLatest,          // ckpt-<step>.h5 in place, `latest` still names the previous one
  kBeforeLatestRename,    // the new `latest` written to its temporary name
  kBeforePrune,           // everything in place, old checkpoints not yet removed
  kDuringPrune,           // after removing the first old checkpoint
};

// "none", "during-temporary-write", "before-rename", "before-latest", "before-latest-rename",
// "before-prune", "during-prune"; crashPointFromName returns nullopt for any other name.
std::string_view crashPointName(CrashPoint point);
std::optional<CrashPoint> crashPointFromName(std::string_view name);

struct CheckpointWriteResult {
  std::filesystem::path path;                  // the new checkpoint
  std::vector<std::filesystem::path> removed;  // old checkpoints and stale temporaries removed
  // The folder's checkpoints this writer did not write (another run's, the one this run resumed
  // from), highest step first: never removed, whatever `keep` says.
  std::vector<std::filesystem::path> keptOthers;
  // Problems after the checkpoint was complete (an old file that would not go): worth a log
  // line, not worth stopping the training for.
  std::vector<std::string> warnings;
};

// A run's checkpoints in one folder. write() writes dir/ckpt-<step>.h5 (creating dir if needed),
// then `latest`, then keeps the `keep` checkpoints of the highest steps among those this writer
// wrote -- the new one always among them -- and removes the others (keep 0 keeps all). A
// checkpoint it did not write is never removed (CheckpointWriteResult::keptOthers lists them).
// Also removes temporaries that crashed writers left behind (one run writes to a folder at a
// time: CheckpointFolderLock). Throws CheckpointError when the checkpoint cannot be written (no
// space, no permission): the previous checkpoints are then untouched; std::invalid_argument for
// content that cannot be stored (a tensor whose shape does not match its values, a bad name).
class CheckpointWriter {
 public:
  CheckpointWriter(std::filesystem::path dir, int keep);
  CheckpointWriteResult write(const CheckpointContent& content,
                              CrashPoint crashAt = CrashPoint::kNone);

 private:
  std::filesystem::path dir_;
  int keep_;
  std::vector<std::filesystem::path> written_;  // this writer's checkpoints still in the folder
};

// "ckpt-00001234.h5".
std::string checkpointFileName(std::int64_t step);

struct CheckpointFile {
  std::int64_t step;  // by its name
  std::filesystem::path path;
};
// dir's checkpoint files (by name, unread), the highest step first; empty when dir does not
// exist. Throws CheckpointError when dir cannot be listed.
std::vector<CheckpointFile> checkpointFiles(const std::filesystem::path& dir);

// The checkpoint encoded as a file (header and HDF5 part), as writeCheckpoint writes it.
std::vector<std::uint8_t> encodeCheckpoint(const CheckpointContent& content);

// Reads and checks one checkpoint file. With a non-empty expectedModelLayout, a checkpoint of
// another layout is refused, naming the first line that differs.
CheckpointContent readCheckpoint(const std::filesystem::path& path,
                                 std::string_view expectedModelLayout = {});
// The same from the file's bytes, `name` standing for the file in messages (the fuzz target).
CheckpointContent parseCheckpoint(std::span<const std::uint8_t> bytes,
                                  const std::filesystem::path& name,
                                  std::string_view expectedModelLayout = {});

// Takes a checkpoint that reads cleanly into the run about to resume, or throws CheckpointError
// naming the file when the run cannot continue from it (another optimiser, a batch that cannot be
// re-sharded). May leave part of a refused checkpoint in the run: the one taken next replaces it.
using TakeCheckpoint =
    std::function<void(const CheckpointContent&, const std::filesystem::path& file)>;

struct ResumePlan {
  std::filesystem::path path;
  CheckpointContent content;
  std::vector<std::string> skipped;  // newer checkpoints refused, one line each, with the reason
  std::string latest;                // what `latest` named ("" when missing)
};

// The newest checkpoint of `dir` that reads cleanly, has the expected layout (if given), holds the
// step its name says (a file renamed or copied in from another run does not) and that
// `take` (if given) accepts, trying ckpt-*.h5 from the highest step down; the ones passed over
// are listed in `skipped` with the reason. nullopt when dir does not exist or holds no checkpoint
// file at all: a fresh start. Throws CheckpointError, listing every file and its problem, when
// there are checkpoints but none is usable: starting from scratch would quietly throw a run away
// (and its checkpoints would be pruned before the unusable ones of higher steps).
std::optional<ResumePlan> findCheckpointToResume(const std::filesystem::path& dir,
                                                 std::string_view expectedModelLayout = {},
                                                 const TakeCheckpoint& take = {});

// --resume: "auto" searches checkpointDir (nullopt: nothing to resume); a folder is searched the
// same way; a file is read as it is, and must be good and taken.
std::optional<ResumePlan> resolveResume(const std::string& resume,
                                        const std::filesystem::path& checkpointDir,
                                        std::string_view expectedModelLayout = {},
                                        const TakeCheckpoint& take = {});

// One line for the log: "resuming from DIR/ckpt-00000300.h5 (step 300, epoch 2, written by 4
// ranks); skipped ckpt-00000400.h5: checksum mismatch ...".
std::string describeResume(const ResumePlan& plan);

// The options whose values differ between two configuration texts of "name = value" lines (or
// any lines: a line present in one and not the other), one "name: saved -> now" entry each. For
// the resume log: a run resumed with another batch size or rank count should say so.
std::vector<std::string> configChanges(std::string_view saved, std::string_view current);

}  // namespace ringtrain::storage
