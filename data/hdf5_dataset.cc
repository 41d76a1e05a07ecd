#include "data/hdf5_dataset.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>

#include "base/file_checks.h"
#include "data/data_error.h"
#include "data/pixel_scale.h"
#include "formats/durable_io.h"
#include "formats/file_bytes.h"

namespace ringtrain::data {
namespace {

namespace hdf5 = formats::hdf5;

using hdf5::check;
using hdf5::Handle;
using hdf5::Hdf5Scope;

constexpr int kLayoutVersion = 1;
// One sample may hold at most 2^28 values: callers allocate batch x elements floats.
constexpr std::int64_t kMaxSampleElements = std::int64_t{1} << 28;
// A chunk is read (and inflated) whole to get one sample out of it.
constexpr std::uint64_t kMaxChunkBytes = std::uint64_t{64} << 20;
// The chunk cache: enough for a batch's chunks of a compressed dataset. Allocated only as chunks
// are read, so it costs nothing for contiguous data.
constexpr std::size_t kChunkCacheBytes = std::size_t{32} << 20;
constexpr std::size_t kChunkCacheSlots = 12421;  // a prime, as HDF5 advises
constexpr std::size_t kMaxSourceBytes = 1 << 16;
// The labels are kept in memory as int32: at most 1 GiB of them.
constexpr std::int64_t kMaxSamples = std::int64_t{1} << 28;
// What the file's bytes can expand to: deflate, the compression h5py and our writer use, expands
// data at most kMaxDeflateExpansion (1032) times. A dataset claiming more values than that from
// the file's size would make the reader -- and the caller, who allocates batches of samples and a
// sampler over N indices -- allocate on the word of a size field alone.
constexpr const char* kLayoutHint =
    " (the layout: /images N x H x W x C, /labels N, attribute num_classes)";

[[noreturn]] void fail(const std::filesystem::path& path, const std::string& what) {
  throw DataError(path.string() + ": " + what);
}

std::string joinDimensions(const hsize_t* dims, int rank) {
  std::string text;
  for (int d = 0; d < rank; ++d)
    text += (d ? "x" : "") + std::to_string(dims[d]);
  return rank == 0 ? "a scalar" : text;
}

// Opens the dataset `name` of the file (the caller has checked it exists).
Handle openDataset(hid_t file, const char* name, const std::filesystem::path& path) {
  if (check(H5Lexists(file, name, H5P_DEFAULT), path, std::string("looking for /") + name) == 0) {
    fail(path, std::string("no dataset /") + name + kLayoutHint);
  }
  Handle access = hdf5::checkedProperties(H5Pcreate(H5P_DATASET_ACCESS), path, "property list");
  check(H5Pset_chunk_cache(access.get(), kChunkCacheSlots, kChunkCacheBytes, 0.75), path,
        "setting the chunk cache");
  return hdf5::checkedDataset(H5Dopen2(file, name, access.get()), path,
                              std::string("/") + name + " is not a dataset that can be opened");
}

// The dimensions of a dataset that must have `rank` of them, each at least 1.
std::vector<hsize_t> checkedDimensions(hid_t dataset, const char* name, int rank,
                                       const char* expected, const std::filesystem::path& path) {
  Handle space =
      hdf5::checkedSpace(H5Dget_space(dataset), path, std::string("reading the shape of /") + name);
  const int actual = check(H5Sget_simple_extent_ndims(space.get()), path,
                           std::string("reading the shape of /") + name);
  std::vector<hsize_t> dims(static_cast<std::size_t>(std::max(actual, 1)), 0);
  check(H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr), path,
        std::string("reading the shape of /") + name);
  if (actual != rank) {
    fail(path, std::string("/") + name + " has " + std::to_string(actual) + " dimensions (" +
                   joinDimensions(dims.data(), actual) + "); expected " + std::to_string(rank) +
                   " (" + expected + ")");
  }
  for (const hsize_t d : dims) {
    if (d == 0 || d > static_cast<hsize_t>(std::numeric_limits<std::int64_t>::max())) {
      fail(path, std::string("/") + name + " is " + joinDimensions(dims.data(), rank) +
                     "; every dimension must be at least 1");
    }
  }
  return dims;
}

// A chunked dataset is read a chunk at a time; refuse chunks no reader should have to hold.
void checkChunks(hid_t dataset, const char* name, int rank, std::size_t elementBytes,
                 const std::filesystem::path& path) {
  const std::string what = std::string("reading the storage layout of /") + name;
  Handle create = hdf5::checkedProperties(H5Dget_create_plist(dataset), path, what);
  const H5D_layout_t layout = H5Pget_layout(create.get());
  if (layout < 0) hdf5::fail(path, what);
  if (layout != H5D_CHUNKED) return;
  std::vector<hsize_t> chunk(static_cast<std::size_t>(rank), 0);
  if (check(H5Pget_chunk(create.get(), rank, chunk.data()), path, what) != rank) {
    fail(path, std::string("/") + name + " has chunks of another rank than the dataset's");
  }
  std::uint64_t bytes = elementBytes;
  bool overflow = false;
  for (const hsize_t c : chunk)
    overflow |= __builtin_mul_overflow(bytes, c, &bytes);
  if (overflow || bytes > kMaxChunkBytes) {
    fail(path, std::string("/") + name + " is stored in chunks of " +
                   joinDimensions(chunk.data(), rank) + " values (" +
                   (overflow ? "over 2^64" : std::to_string(bytes)) +
                   " bytes); at most 64 MiB per chunk are read");
  }
}

// Checks that `values` values of `valueBytes` bytes each fit in what a file of `fileBytes` bytes
// can hold once inflated (see kMaxDeflateExpansion).
void checkFitsTheFile(const char* name, const std::string& claimed, std::uint64_t values,
                      std::uint64_t valueBytes, std::uint64_t fileBytes,
                      const std::filesystem::path& path) {
  std::uint64_t bytes = 0;
  std::uint64_t room = 0;
  const bool overflow = __builtin_mul_overflow(values, valueBytes, &bytes);
  const bool roomOverflow = __builtin_mul_overflow(fileBytes, formats::kMaxDeflateExpansion, &room);
  if (!roomOverflow && (overflow || bytes > room)) {
    fail(path, std::string("/") + name + " claims " + claimed + " (" +
                   (overflow ? "over 2^64" : std::to_string(bytes)) +
                   " bytes), more than a file of " + std::to_string(fileBytes) +
                   " bytes can hold even compressed");
  }
}

PixelType pixelTypeOf(hid_t dataset, const std::filesystem::path& path) {
  Handle type = hdf5::checkedType(H5Dget_type(dataset), path, "reading the type of /images");
  const H5T_class_t kind = H5Tget_class(type.get());
  const std::size_t size = H5Tget_size(type.get());
  if (kind == H5T_INTEGER && size == 1 && H5Tget_sign(type.get()) == H5T_SGN_NONE) {
    return PixelType::kUint8;
  }
  if (kind == H5T_FLOAT && size == 4) return PixelType::kFloat32;
  fail(path, "/images has type " + hdf5::describeType(type.get()) + "; expected uint8 or float32");
}

void checkLabelType(hid_t dataset, const std::filesystem::path& path) {
  Handle type = hdf5::checkedType(H5Dget_type(dataset), path, "reading the type of /labels");
  if (H5Tget_class(type.get()) != H5T_INTEGER) {
    fail(path, "/labels has type " + hdf5::describeType(type.get()) + "; expected an integer type");
  }
}

hid_t memoryTypeOf(PixelType type) {
  return type == PixelType::kUint8 ? H5T_NATIVE_UINT8 : H5T_NATIVE_FLOAT;
}

std::size_t bytesOf(PixelType type) {
  return type == PixelType::kUint8 ? 1 : 4;
}

// Writes one sample, stored H x W x C, as C x H x W floats in [0, 1].
template <class Stored>
void toChannelsFirst(const Stored* stored, const SampleShape& shape, float* out) {
  const std::size_t channels = static_cast<std::size_t>(shape.channels);
  const std::size_t pixels = static_cast<std::size_t>(shape.height * shape.width);
  const auto convert = [](Stored value) {
    if constexpr (std::is_same_v<Stored, std::uint8_t>) {
      return byteToUnit()[value];
    } else {
      return value;
    }
  };
  if (channels == 1) {
    for (std::size_t p = 0; p < pixels; ++p)
      out[p] = convert(stored[p]);
    return;
  }
  for (std::size_t p = 0; p < pixels; ++p) {
    for (std::size_t c = 0; c < channels; ++c)
      out[c * pixels + p] = convert(stored[p * channels + c]);
  }
}

}  // namespace

const char* toString(PixelType type) {
  return type == PixelType::kUint8 ? "uint8" : "float32";
}

// ---- Reading ------------------------------------------------------------------------------------

Hdf5Dataset::Hdf5Dataset(const std::filesystem::path& path) : path_(path) {
  if (auto problem = base::regularFileProblem(path)) fail(path, *problem);
  Hdf5Scope scope;
  if (check(H5Fis_hdf5(path.c_str()), path, "cannot read the file") == 0) {
    fail(path, "not an HDF5 file (no HDF5 signature)");
  }
  Handle access =
      hdf5::checkedProperties(H5Pcreate(H5P_FILE_ACCESS), path, "creating a property list");
  // HDF5's data sieving turns every small read of contiguous data into a 64 KiB one: a batch of
  // 64 random 784-byte MNIST samples read 4 MiB. Each block of ours is a whole sample or more,
  // read once; no sieve buffer is needed.
  check(H5Pset_sieve_buf_size(access.get(), 0), path, "turning data sieving off");
  openChecked(hdf5::checkedFile(H5Fopen(path.c_str(), H5F_ACC_RDONLY, access.get()), path,
                                "cannot open the HDF5 file"));
}

Hdf5Dataset::Hdf5Dataset(FromImage, std::span<const std::uint8_t> image, const std::string& name)
    : path_(name) {
  Hdf5Scope scope;
  Handle access =
      hdf5::checkedProperties(H5Pcreate(H5P_FILE_ACCESS), path_, "creating a property list");
  // The core driver serves the file from memory; no backing store is written.
  check(H5Pset_fapl_core(access.get(), 1 << 16, false), path_, "setting the core driver");
  check(H5Pset_file_image(access.get(), const_cast<std::uint8_t*>(image.data()), image.size()),
        path_, "setting the file image");
  openChecked(hdf5::checkedFile(H5Fopen(name.c_str(), H5F_ACC_RDONLY, access.get()), path_,
                                "cannot open the HDF5 file image"));
}

Hdf5Dataset Hdf5Dataset::fromImage(std::span<const std::uint8_t> image, const std::string& name) {
  if (image.empty()) fail(name, "empty file image");
  return Hdf5Dataset(FromImage{}, image, name);
}

Hdf5Dataset::Hdf5Dataset(Hdf5Dataset&&) noexcept = default;

Hdf5Dataset::~Hdf5Dataset() {
  Hdf5Scope scope;
  images_.reset();
  labelData_.reset();
  file_.reset();
}

void Hdf5Dataset::openChecked(Handle file) {
  file_ = std::move(file);
  images_ = openDataset(file_.get(), "images", path_);
  labelData_ = openDataset(file_.get(), "labels", path_);
  const std::vector<hsize_t> images =
      checkedDimensions(images_.get(), "images", 4, "N x H x W x C", path_);
  const std::vector<hsize_t> labels = checkedDimensions(labelData_.get(), "labels", 1, "N", path_);
  pixelType_ = pixelTypeOf(images_.get(), path_);
  checkLabelType(labelData_.get(), path_);
  if (images[0] != labels[0]) {
    fail(path_, "/images holds " + std::to_string(images[0]) + " samples but /labels holds " +
                    std::to_string(labels[0]) + " labels");
  }
  shape_ = SampleShape{static_cast<std::int64_t>(images[3]), static_cast<std::int64_t>(images[1]),
                       static_cast<std::int64_t>(images[2])};
  std::uint64_t elements = 1;
  bool overflow = false;
  for (int d = 1; d < 4; ++d)
    overflow |= __builtin_mul_overflow(elements, images[static_cast<std::size_t>(d)], &elements);
  if (overflow || elements > static_cast<std::uint64_t>(kMaxSampleElements)) {
    fail(path_, "/images has samples of " + joinDimensions(images.data() + 1, 3) +
                    " values; at most 2^28 per sample are read");
  }
  checkChunks(images_.get(), "images", 4, bytesOf(pixelType_), path_);
  checkChunks(labelData_.get(), "labels", 1, 8, path_);
  hsize_t fileBytes = 0;
  check(H5Fget_filesize(file_.get(), &fileBytes), path_, "reading the file size");
  checkFitsTheFile("images",
                   joinDimensions(images.data(), 4) + " " + toString(pixelType_) + " values",
                   images[0], elements * bytesOf(pixelType_), fileBytes, path_);
  // In memory each label takes an int32, whatever its type in the file.
  checkFitsTheFile("labels", std::to_string(labels[0]) + " labels", labels[0], sizeof(std::int32_t),
                   fileBytes, path_);
  count_ = static_cast<std::int64_t>(images[0]);

  const std::optional<std::int64_t> classes =
      hdf5::readIntegerAttribute(file_.get(), "num_classes", path_);
  if (!classes)
    fail(path_, std::string("no attribute num_classes on the root group") + kLayoutHint);
  if (*classes < 1 || *classes > std::numeric_limits<std::int32_t>::max()) {
    fail(path_, "attribute num_classes is " + std::to_string(*classes) +
                    "; expected a number of classes from 1 to 2^31-1");
  }
  numClasses_ = static_cast<int>(*classes);
  const std::optional<std::int64_t> version =
      hdf5::readIntegerAttribute(file_.get(), "ringtrain_layout", path_);
  if (version && *version != kLayoutVersion) {
    fail(path_, "attribute ringtrain_layout is " + std::to_string(*version) +
                    "; this ringtrain reads layout " + std::to_string(kLayoutVersion));
  }
  source_ = hdf5::readStringAttribute(file_.get(), "source", path_, kMaxSourceBytes)
                .value_or("source not recorded");
  readLabels();
}

// All labels, once: they are 4 bytes a sample against hundreds for the images, a per-batch read
// of them would cost as much as the images' (one H5Dread per block), and a bad label is better
// found at the start than in the middle of training.
void Hdf5Dataset::readLabels() {
  if (count_ > kMaxSamples) {
    fail(path_, "/images holds " + std::to_string(count_) +
                    " samples; at most 2^28 are read (their labels are kept in memory)");
  }
  labels_.resize(static_cast<std::size_t>(count_));
  // HDF5 converts any integer type; values beyond int32 are clipped, and then out of range.
  check(H5Dread(labelData_.get(), H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, labels_.data()),
        path_, "reading /labels");
  for (std::size_t i = 0; i < labels_.size(); ++i) {
    if (labels_[i] < 0 || labels_[i] >= numClasses_) {
      fail(path_, "label " + std::to_string(labels_[i]) + " of sample " + std::to_string(i) +
                      " is out of range: " + std::to_string(numClasses_) +
                      " classes take labels 0 to " + std::to_string(numClasses_ - 1));
    }
  }
}

// Reads the samples `sorted` (increasing, distinct) into staged_, in that order: one hyperslab
// block and one H5Dread per run of consecutive indices. (One read of the union of the blocks,
// selected with H5S_SELECT_OR, is half as fast: HDF5 1.10 spends the difference merging the
// selection.)
void Hdf5Dataset::readBlocks(std::span<const std::int64_t> sorted) const {
  const std::string what = "reading a batch of " + std::to_string(sorted.size()) + " samples";
  const hsize_t h = static_cast<hsize_t>(shape_.height);
  const hsize_t w = static_cast<hsize_t>(shape_.width);
  const hsize_t c = static_cast<hsize_t>(shape_.channels);
  const std::array<hsize_t, 4> memoryDims = {sorted.size(), h, w, c};
  Handle fileSpace = hdf5::checkedSpace(H5Dget_space(images_.get()), path_, what);
  Handle memorySpace =
      hdf5::checkedSpace(H5Screate_simple(4, memoryDims.data(), nullptr), path_, what);
  staged_.resize(sorted.size() * static_cast<std::size_t>(shape_.elements()) * bytesOf(pixelType_));
  for (std::size_t i = 0; i < sorted.size();) {
    std::size_t end = i + 1;
    while (end < sorted.size() && sorted[end] == sorted[end - 1] + 1)
      ++end;
    const std::array<hsize_t, 4> inFile = {static_cast<hsize_t>(sorted[i]), 0, 0, 0};
    const std::array<hsize_t, 4> inMemory = {i, 0, 0, 0};
    const std::array<hsize_t, 4> count = {end - i, h, w, c};
    check(H5Sselect_hyperslab(fileSpace.get(), H5S_SELECT_SET, inFile.data(), nullptr, count.data(),
                              nullptr),
          path_, what);
    check(H5Sselect_hyperslab(memorySpace.get(), H5S_SELECT_SET, inMemory.data(), nullptr,
                              count.data(), nullptr),
          path_, what);
    check(H5Dread(images_.get(), memoryTypeOf(pixelType_), memorySpace.get(), fileSpace.get(),
                  H5P_DEFAULT, staged_.data()),
          path_, what + " from /images");
    i = end;
  }
}

void Hdf5Dataset::gather(std::span<const std::int64_t> indices, float* images,
                         std::int32_t* labels) const {
  for (const std::int64_t i : indices) {
    if (i < 0 || i >= count_) {
      throw std::out_of_range("Hdf5Dataset::gather: index " + std::to_string(i) + " outside [0, " +
                              std::to_string(count_) + ")");
    }
  }
  if (indices.empty()) return;
  // The distinct samples in file order: runs of neighbours become one block, and a sample asked
  // for twice is read once.
  std::vector<std::int64_t> sorted(indices.begin(), indices.end());
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());

  Hdf5Scope scope;
  readBlocks(sorted);
  const std::size_t elements = static_cast<std::size_t>(shape_.elements());
  for (std::size_t j = 0; j < indices.size(); ++j) {
    const std::size_t k = static_cast<std::size_t>(
        std::lower_bound(sorted.begin(), sorted.end(), indices[j]) - sorted.begin());
    labels[j] = labels_[static_cast<std::size_t>(indices[j])];
    if (pixelType_ == PixelType::kUint8) {
      toChannelsFirst(staged_.data() + k * elements, shape_, images + j * elements);
    } else {
      toChannelsFirst(reinterpret_cast<const float*>(staged_.data()) + k * elements, shape_,
                      images + j * elements);
    }
  }
}

std::string Hdf5Dataset::describe() const {
  return "HDF5 " + path_.string() + ": " + std::to_string(count_) + " samples of " +
         data::toString(shape_) + " " + toString(pixelType_) + ", " + std::to_string(numClasses_) +
         " classes (" + source_ + ")";
}

DatasetPair loadHdf5Pair(const std::filesystem::path& trainPath,
                         const std::filesystem::path& testPath) {
  auto train = std::make_unique<Hdf5Dataset>(trainPath);
  auto test = std::make_unique<Hdf5Dataset>(testPath);
  if (test->sampleShape() != train->sampleShape()) {
    fail(testPath, "samples are " + data::toString(test->sampleShape()) + " but " +
                       trainPath.string() + " has " + data::toString(train->sampleShape()));
  }
  if (test->numClasses() != train->numClasses()) {
    fail(testPath, "has " + std::to_string(test->numClasses()) + " classes but " +
                       trainPath.string() + " has " + std::to_string(train->numClasses()));
  }
  DatasetPair pair;
  pair.train = std::move(train);
  pair.test = std::move(test);
  return pair;
}

// ---- Writing ------------------------------------------------------------------------------------

Hdf5DatasetWriter::Hdf5DatasetWriter(const std::filesystem::path& path, const Hdf5DatasetSpec& spec)
    : path_(path), spec_(spec) {
  const SampleShape& s = spec.shape;
  const auto fits = [](std::int64_t value) { return value >= 1 && value <= kMaxSampleElements; };
  if (!fits(s.channels) || !fits(s.height) || !fits(s.width) || !fits(s.channels * s.height) ||
      !fits(s.elements())) {
    throw std::invalid_argument("Hdf5DatasetWriter: sample shape " + data::toString(s) +
                                " has a dimension below 1 or more than 2^28 values");
  }
  if (spec.count < 1 || spec.numClasses < 1 || spec.compressionLevel < 0 ||
      spec.compressionLevel > 9 || spec.chunkSamples < 1) {
    throw std::invalid_argument(
        "Hdf5DatasetWriter: count, classes and chunk samples must be positive and the "
        "compression level in [0, 9]");
  }
  temporary_ = path.string() + ".partial-" + std::to_string(static_cast<long>(getpid()));
  Hdf5Scope scope;
  try {
    create();
  } catch (...) {
    abandon();
    throw;
  }
}

void Hdf5DatasetWriter::create() {
  const std::filesystem::path& path = path_;
  const Hdf5DatasetSpec& spec = spec_;
  const SampleShape& s = spec.shape;
  const std::string what = "creating the dataset";
  file_ = hdf5::checkedFile(H5Fcreate(temporary_.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT),
                            path, "cannot create the HDF5 file");
  const std::array<hsize_t, 4> dims = {
      static_cast<hsize_t>(spec.count), static_cast<hsize_t>(s.height),
      static_cast<hsize_t>(s.width), static_cast<hsize_t>(s.channels)};
  Handle imageSpace = hdf5::checkedSpace(H5Screate_simple(4, dims.data(), nullptr), path, what);
  Handle labelSpace = hdf5::checkedSpace(H5Screate_simple(1, dims.data(), nullptr), path, what);
  Handle imageCreate =
      hdf5::checkedProperties(H5Pcreate(H5P_DATASET_CREATE), path, "property list");
  Handle labelCreate =
      hdf5::checkedProperties(H5Pcreate(H5P_DATASET_CREATE), path, "property list");
  // Every value is written once by append(); filling the space first would write it twice.
  check(H5Pset_fill_time(imageCreate.get(), H5D_FILL_TIME_NEVER), path, what);
  check(H5Pset_fill_time(labelCreate.get(), H5D_FILL_TIME_NEVER), path, what);
  if (spec.compressionLevel > 0) {
    std::array<hsize_t, 4> chunk = dims;
    chunk[0] = std::min<hsize_t>(dims[0], static_cast<hsize_t>(spec.chunkSamples));
    check(H5Pset_chunk(imageCreate.get(), 4, chunk.data()), path, what);
    if (spec.pixelType == PixelType::kFloat32) check(H5Pset_shuffle(imageCreate.get()), path, what);
    check(H5Pset_deflate(imageCreate.get(), static_cast<unsigned>(spec.compressionLevel)), path,
          what);
  }
  const hid_t fileType = spec.pixelType == PixelType::kUint8 ? H5T_STD_U8LE : H5T_IEEE_F32LE;
  images_ = hdf5::checkedDataset(H5Dcreate2(file_.get(), "images", fileType, imageSpace.get(),
                                            H5P_DEFAULT, imageCreate.get(), H5P_DEFAULT),
                                 path, "creating /images");
  labels_ = hdf5::checkedDataset(H5Dcreate2(file_.get(), "labels", H5T_STD_I32LE, labelSpace.get(),
                                            H5P_DEFAULT, labelCreate.get(), H5P_DEFAULT),
                                 path, "creating /labels");
  hdf5::writeIntegerAttribute(file_.get(), "num_classes", spec.numClasses, path);
  hdf5::writeIntegerAttribute(file_.get(), "ringtrain_layout", kLayoutVersion, path);
  hdf5::writeStringAttribute(file_.get(), "source", spec.source, path);
}

Hdf5DatasetWriter::~Hdf5DatasetWriter() {
  if (!finished_) abandon();
}

void Hdf5DatasetWriter::abandon() {
  {
    Hdf5Scope scope;
    images_.reset();
    labels_.reset();
    file_.reset();
  }
  std::error_code ignored;
  std::filesystem::remove(temporary_, ignored);
}

void Hdf5DatasetWriter::append(std::span<const std::uint8_t> pixels,
                               std::span<const std::int32_t> labels) {
  if (spec_.pixelType != PixelType::kUint8) {
    throw std::invalid_argument("Hdf5DatasetWriter: uint8 pixels for a float32 dataset");
  }
  appendRaw(pixels.data(), H5T_NATIVE_UINT8, pixels.size(), labels);
}

void Hdf5DatasetWriter::append(std::span<const float> pixels,
                               std::span<const std::int32_t> labels) {
  if (spec_.pixelType != PixelType::kFloat32) {
    throw std::invalid_argument("Hdf5DatasetWriter: float32 pixels for a uint8 dataset");
  }
  appendRaw(pixels.data(), H5T_NATIVE_FLOAT, pixels.size(), labels);
}

void Hdf5DatasetWriter::appendRaw(const void* pixels, hid_t memoryType, std::size_t values,
                                  std::span<const std::int32_t> labels) {
  const auto samples = static_cast<std::int64_t>(labels.size());
  if (finished_ || samples > spec_.count - written_ ||
      values != labels.size() * static_cast<std::size_t>(spec_.shape.elements())) {
    throw std::invalid_argument("Hdf5DatasetWriter::append: " + std::to_string(samples) +
                                " labels and " + std::to_string(values) + " values for " +
                                std::to_string(spec_.count - written_) + " samples left of " +
                                data::toString(spec_.shape));
  }
  for (std::size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] < 0 || labels[i] >= spec_.numClasses) {
      throw std::invalid_argument("Hdf5DatasetWriter::append: label " + std::to_string(labels[i]) +
                                  " of sample " + std::to_string(written_ + std::int64_t(i)) +
                                  " outside [0, " + std::to_string(spec_.numClasses) + ")");
    }
  }
  if (samples == 0) return;
  const std::string what = "writing samples " + std::to_string(written_) + " to " +
                           std::to_string(written_ + samples - 1);
  Hdf5Scope scope;
  const std::array<hsize_t, 4> start = {static_cast<hsize_t>(written_), 0, 0, 0};
  const std::array<hsize_t, 4> count = {
      static_cast<hsize_t>(samples), static_cast<hsize_t>(spec_.shape.height),
      static_cast<hsize_t>(spec_.shape.width), static_cast<hsize_t>(spec_.shape.channels)};
  Handle imageSpace = hdf5::checkedSpace(H5Dget_space(images_.get()), path_, what);
  Handle labelSpace = hdf5::checkedSpace(H5Dget_space(labels_.get()), path_, what);
  check(H5Sselect_hyperslab(imageSpace.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(),
                            nullptr),
        path_, what);
  check(H5Sselect_hyperslab(labelSpace.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(),
                            nullptr),
        path_, what);
  Handle imageMemory = hdf5::checkedSpace(H5Screate_simple(4, count.data(), nullptr), path_, what);
  Handle labelMemory = hdf5::checkedSpace(H5Screate_simple(1, count.data(), nullptr), path_, what);
  check(
      H5Dwrite(images_.get(), memoryType, imageMemory.get(), imageSpace.get(), H5P_DEFAULT, pixels),
      path_, what);
  check(H5Dwrite(labels_.get(), H5T_NATIVE_INT32, labelMemory.get(), labelSpace.get(), H5P_DEFAULT,
                 labels.data()),
        path_, what);
  written_ += samples;
}

void Hdf5DatasetWriter::finish() {
  if (finished_) return;
  if (written_ != spec_.count) {
    throw std::invalid_argument("Hdf5DatasetWriter::finish: " + std::to_string(written_) + " of " +
                                std::to_string(spec_.count) + " samples written");
  }
  {
    Hdf5Scope scope;
    images_.close(path_, "closing /images");
    labels_.close(path_, "closing /labels");
    file_.close(temporary_, "closing the file");
  }
  formats::syncFile(temporary_);
  formats::renameDurably(temporary_, path_);
  finished_ = true;
}

void writeHdf5Dataset(const std::filesystem::path& path, const Hdf5DatasetSpec& spec,
                      std::span<const std::uint8_t> pixels, std::span<const std::int32_t> labels) {
  Hdf5DatasetWriter writer(path, spec);
  writer.append(pixels, labels);
  writer.finish();
}

}  // namespace ringtrain::data
