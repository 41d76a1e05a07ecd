// HDF5 datasets: the layout ringtrain reads and writes, a reader that fetches only the samples a
// batch asks for, and a writer.
//
// The layout (ringtrain HDF5 dataset, version 1):
//
//   /images  N x H x W x C  uint8 (0 to 255, scaled by 1/255 when read) or float32 (read as it
//                           is, expected in [0, 1]); samples in the first dimension, channels
//                           last, as TensorFlow and h5py users store images.
//   /labels  N              any integer type, every value in [0, num_classes)
//   attributes of the root group:
//     num_classes           integer, at least 1
//     source                string: where the samples came from (optional when reading)
//     ringtrain_layout      integer 1: the layout's version (optional when reading)
//
// Any storage HDF5 offers is read: contiguous (what idx_to_hdf5 writes by default, and the
// fastest for random access: a sample is one read of its own bytes), or chunked and compressed
// (a sample then costs the decompression of its chunk; chunks above 64 MiB are refused, as one
// read would have to allocate that much). A file written by h5py with these names reads as it is.
//
// Reading. gather() selects the batch's samples in the file with hyperslab selections, each run
// of consecutive indices one block read with one H5Dread: only the requested samples' bytes
// leave the file, so a dataset larger than a node's memory works and each rank reads only its
// shard. HDF5's data sieving, which would read 64 KiB around every small block, is turned off.
// The labels, 4 bytes a sample, are read and checked once when the file is opened and kept in
// memory (up to 2^28 samples).
//
// Threads: every HDF5 call holds the process-wide HDF5 lock (see hdf5_support.h), so gather may
// be called from several threads, but the calls run one at a time.
//
// Errors: a file that does not follow the layout -- not HDF5, a dataset missing, the wrong number
// of dimensions, counts that differ, an unsupported type, a label out of range -- throws DataError
// from the constructor, one line naming the file and the problem.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "formats/hdf5_support.h"

namespace ringtrain::data {

enum class PixelType { kUint8, kFloat32 };

// "uint8" or "float32".
const char* toString(PixelType type);

class Hdf5Dataset final : public Dataset {
 public:
  // Opens and checks the file; reads no sample yet.
  explicit Hdf5Dataset(const std::filesystem::path& path);
  // The same from an image of a whole file in memory (HDF5's core driver), named `name` in
  // messages: for the fuzz target, and for data that arrived over the network.
  static Hdf5Dataset fromImage(std::span<const std::uint8_t> image, const std::string& name);
  ~Hdf5Dataset() override;
  Hdf5Dataset(Hdf5Dataset&&) noexcept;
  Hdf5Dataset& operator=(Hdf5Dataset&&) = delete;
  Hdf5Dataset(const Hdf5Dataset&) = delete;
  Hdf5Dataset& operator=(const Hdf5Dataset&) = delete;

  std::int64_t size() const override { return count_; }
  SampleShape sampleShape() const override { return shape_; }
  int numClasses() const override { return numClasses_; }
  void gather(std::span<const std::int64_t> indices, float* images,
              std::int32_t* labels) const override;
  std::string describe() const override;
  bool readsStorage() const override { return true; }

  PixelType pixelType() const { return pixelType_; }
  const std::string& source() const { return source_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  struct FromImage {};
  Hdf5Dataset(FromImage, std::span<const std::uint8_t> image, const std::string& name);
  void openChecked(formats::hdf5::Handle file);
  void readLabels();
  void readBlocks(std::span<const std::int64_t> sorted) const;

  std::filesystem::path path_;
  formats::hdf5::Handle file_;
  formats::hdf5::Handle images_;
  formats::hdf5::Handle labelData_;
  std::int64_t count_ = 0;
  SampleShape shape_;
  PixelType pixelType_ = PixelType::kUint8;
  int numClasses_ = 0;
  std::string source_;
  std::vector<std::int32_t> labels_;  // all of them, read and checked when the file is opened
  // Scratch of gather, reused between calls under the HDF5 lock: the batch's distinct samples in
  // file order, as stored (H x W x C).
  mutable std::vector<std::uint8_t> staged_;
};

// The MNIST-style pair in one folder: train.h5 and test.h5 (what `idx_to_hdf5 --mnist` writes).
// Test samples must have the training samples' shape and classes.
DatasetPair loadHdf5Pair(const std::filesystem::path& trainPath,
                         const std::filesystem::path& testPath);

// What a new file will hold.
struct Hdf5DatasetSpec {
  SampleShape shape;  // of one sample; stored as H x W x C
  PixelType pixelType = PixelType::kUint8;
  std::int64_t count = 0;
  int numClasses = 0;
  std::string source;
  // 0: contiguous and uncompressed, the fastest for random batches. 1 to 9: deflate at that level
  // in chunks of chunkSamples samples, smaller files but each sample read inflates its chunk.
  int compressionLevel = 0;
  std::int64_t chunkSamples = 64;
};

// Writes a dataset of the layout above through a temporary file in the same folder that is
// renamed over `path` only once it is complete and synced: a reader, or a crash, never sees half
// a file. Samples are appended in order, in as many calls as the caller likes, so a dataset
// larger than memory can be written too.
class Hdf5DatasetWriter {
 public:
  // Throws std::invalid_argument for a spec that makes no sense and DataError when the file
  // cannot be created.
  Hdf5DatasetWriter(const std::filesystem::path& path, const Hdf5DatasetSpec& spec);
  // Without finish(): the temporary file is removed and `path` left as it was.
  ~Hdf5DatasetWriter();
  Hdf5DatasetWriter(const Hdf5DatasetWriter&) = delete;
  Hdf5DatasetWriter& operator=(const Hdf5DatasetWriter&) = delete;

  // Appends labels.size() samples: `pixels` holds their values one sample after the other, each
  // H x W x C (the file's order). Throws std::invalid_argument for sizes that do not match, a
  // type other than the spec's, more samples than spec.count, or a label out of range.
  void append(std::span<const std::uint8_t> pixels, std::span<const std::int32_t> labels);
  void append(std::span<const float> pixels, std::span<const std::int32_t> labels);
  // Checks that spec.count samples came, closes, syncs and renames the file into place.
  void finish();

 private:
  void create();
  void abandon();
  void appendRaw(const void* pixels, hid_t memoryType, std::size_t values,
                 std::span<const std::int32_t> labels);

  std::filesystem::path path_;
  std::filesystem::path temporary_;
  Hdf5DatasetSpec spec_;
  std::int64_t written_ = 0;
  bool finished_ = false;
  formats::hdf5::Handle file_;
  formats::hdf5::Handle images_;
  formats::hdf5::Handle labels_;
};

// The whole dataset in one call: `pixels` holds spec.count samples of H x W x C values.
void writeHdf5Dataset(const std::filesystem::path& path, const Hdf5DatasetSpec& spec,
                      std::span<const std::uint8_t> pixels, std::span<const std::int32_t> labels);

}  // namespace ringtrain::data
