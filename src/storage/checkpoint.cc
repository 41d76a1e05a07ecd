#include "src/storage/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <utility>

#include "base/exit_status.h"
#include "base/file_checks.h"
#include "base/read_exactly.h"
#include "formats/crc32c.h"
#include "formats/durable_io.h"
#include "formats/hdf5_support.h"
#include "formats/separate_check.h"

namespace ringtrain::storage {
namespace {

namespace fs = std::filesystem;
namespace hdf5 = formats::hdf5;
using formats::crc32c;
using hdf5::check;
using hdf5::Handle;
using hdf5::Hdf5Scope;

// ---- The header -------------------------------------------------------------------------------
//
//   0  16  magic "ringtrain-ckpt" and two NULs
//  16   4  format version (2)
//  20   4  header length (512)
//  24   8  length of the HDF5 part that follows the header
//  32   4  CRC-32C of the HDF5 part
//  36   8  step
//  44   4  CRC-32C of bytes 0 to 43
//  48 ...  zeros up to 512 (HDF5's smallest user block)
// All numbers little-endian.

constexpr std::array<char, 16> kMagic = {'r', 'i', 'n', 'g', 't', 'r', 'a',  'i',
                                         'n', '-', 'c', 'k', 'p', 't', '\0', '\0'};
// Version 2 added the member lists (/parameter_names, /optimizer_state_names): see memberNames.
constexpr std::uint32_t kFormatVersion = 2;
constexpr std::size_t kHeaderBytes = 512;
constexpr std::size_t kHeaderCrcOffset = 44;
constexpr std::size_t kHeaderUsedBytes = 48;
constexpr const char* kFormatName = "ringtrain checkpoint";
constexpr std::size_t kMaxNameBytes = 1024;
constexpr std::size_t kMaxKindBytes = 64;
constexpr int kMaxRank = 8;
constexpr const char* kLatestName = "latest";
constexpr std::string_view kCheckpointPrefix = "ckpt-";
constexpr std::string_view kCheckpointSuffix = ".h5";
constexpr std::string_view kTemporaryMarker = ".tmp-";

[[noreturn]] void fail(const fs::path& file, const std::string& what) {
  throw CheckpointError(file.string() + ": " + what);
}

void putLe(std::uint8_t* p, std::uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i)
    p[i] = static_cast<std::uint8_t>(value >> (8 * i));
}

std::uint64_t getLe(const std::uint8_t* p, int bytes) {
  std::uint64_t value = 0;
  for (int i = 0; i < bytes; ++i)
    value |= std::uint64_t{p[i]} << (8 * i);
  return value;
}

std::string hex32(std::uint32_t value) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%08x", value);
  return text;
}

std::vector<std::uint8_t> encodeHeader(std::uint64_t imageBytes, std::uint32_t imageCrc,
                                       std::int64_t step) {
  std::vector<std::uint8_t> header(kHeaderBytes, 0);
  std::memcpy(header.data(), kMagic.data(), kMagic.size());
  putLe(header.data() + 16, kFormatVersion, 4);
  putLe(header.data() + 20, kHeaderBytes, 4);
  putLe(header.data() + 24, imageBytes, 8);
  putLe(header.data() + 32, imageCrc, 4);
  putLe(header.data() + 36, static_cast<std::uint64_t>(step), 8);
  putLe(header.data() + kHeaderCrcOffset,
        crc32c(std::span<const std::uint8_t>(header.data(), kHeaderCrcOffset)), 4);
  return header;
}

struct Header {
  std::uint64_t imageBytes = 0;
  std::uint32_t imageCrc = 0;
  std::int64_t step = 0;
};

// Checks the header (the file's first bytes, up to 512) against a file of `fileBytes` bytes;
// everything but the HDF5 part's CRC, which needs the whole file.
Header decodeHeader(std::span<const std::uint8_t> head, std::uint64_t fileBytes,
                    const fs::path& file) {
  if (fileBytes == 0) fail(file, "empty file (0 bytes); not a checkpoint");
  const bool hdf5Signature =
      head.size() >= 4 && head[0] == 0x89 && head[1] == 'H' && head[2] == 'D' && head[3] == 'F';
  const std::size_t compared = std::min(head.size(), kMagic.size());
  if (hdf5Signature || std::memcmp(head.data(), kMagic.data(), compared) != 0) {
    fail(file, std::string(hdf5Signature ? "an HDF5 file but " : "") +
                   "not a ringtrain checkpoint (no ringtrain-ckpt header)");
  }
  if (head.size() < kHeaderBytes) {
    fail(file, "truncated: " + std::to_string(fileBytes) +
                   " bytes, less than the 512-byte checkpoint header");
  }
  const std::uint32_t storedHeaderCrc =
      static_cast<std::uint32_t>(getLe(head.data() + kHeaderCrcOffset, 4));
  if (crc32c(head.first(kHeaderCrcOffset)) != storedHeaderCrc) {
    fail(file, "damaged checkpoint header (checksum mismatch)");
  }
  const auto version = static_cast<std::uint32_t>(getLe(head.data() + 16, 4));
  const auto headerBytes = static_cast<std::uint32_t>(getLe(head.data() + 20, 4));
  if (version != kFormatVersion || headerBytes != kHeaderBytes) {
    fail(file, "checkpoint format version " + std::to_string(version) +
                   "; this ringtrain reads version " + std::to_string(kFormatVersion));
  }
  for (std::size_t i = kHeaderUsedBytes; i < kHeaderBytes; ++i) {
    if (head[i] != 0) fail(file, "damaged checkpoint header (bytes after the fields)");
  }
  Header header;
  header.imageBytes = getLe(head.data() + 24, 8);
  header.imageCrc = static_cast<std::uint32_t>(getLe(head.data() + 32, 4));
  header.step = static_cast<std::int64_t>(getLe(head.data() + 36, 8));
  const std::uint64_t after = fileBytes - kHeaderBytes;
  if (header.imageBytes > after) {
    fail(file, "truncated: the header says " + std::to_string(header.imageBytes) +
                   " bytes of HDF5 data follow but the file has " + std::to_string(after));
  }
  if (header.imageBytes < after) {
    fail(file, "trailing bytes: the header says " + std::to_string(header.imageBytes) +
                   " bytes of HDF5 data follow but the file has " + std::to_string(after));
  }
  if (header.step < 0) fail(file, "damaged checkpoint header (negative step)");
  return header;
}

// ---- Writing the HDF5 part ------------------------------------------------------------------

std::string shapeText(const std::vector<std::int64_t>& shape) {
  std::string text;
  for (const std::int64_t d : shape)
    text += (text.empty() ? "" : "x") + std::to_string(d);
  return shape.empty() ? "a scalar" : text;
}

void validateTensors(const std::vector<Tensor>& tensors, const char* group) {
  std::vector<std::string_view> names;
  for (const Tensor& t : tensors) {
    const std::string where = std::string("writeCheckpoint: ") + group + " tensor '" + t.name + "'";
    if (t.name.empty() || t.name == "." || t.name.find_first_of("/\n") != std::string::npos ||
        t.name.size() > kMaxNameBytes) {
      throw std::invalid_argument(where +
                                  ": a name must be non-empty, not '.', without '/' or newline");
    }
    if (t.shape.size() > static_cast<std::size_t>(kMaxRank)) {
      throw std::invalid_argument(where + " has more than 8 dimensions");
    }
    std::int64_t count = 1;
    for (const std::int64_t d : t.shape) {
      if (d < 0 || __builtin_mul_overflow(count, d, &count)) {
        throw std::invalid_argument(where + " has shape " + shapeText(t.shape));
      }
    }
    if (static_cast<std::uint64_t>(count) != t.values.size()) {
      throw std::invalid_argument(where + " has shape " + shapeText(t.shape) + " but " +
                                  std::to_string(t.values.size()) + " values");
    }
    names.push_back(t.name);
  }
  std::sort(names.begin(), names.end());
  if (std::adjacent_find(names.begin(), names.end()) != names.end()) {
    throw std::invalid_argument(std::string("writeCheckpoint: two ") + group +
                                " tensors share a name");
  }
}

// A group that remembers the order its members were created in: tensors come back in it.
Handle createOrderedGroup(hid_t file, const char* name, const fs::path& where) {
  Handle create = hdf5::checkedProperties(H5Pcreate(H5P_GROUP_CREATE), where, "property list");
  check(H5Pset_link_creation_order(create.get(), H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED),
        where, "property list");
  return hdf5::checkedGroup(H5Gcreate2(file, name, H5P_DEFAULT, create.get(), H5P_DEFAULT), where,
                            std::string("creating group ") + name);
}

void writeTensors(hid_t group, const std::vector<Tensor>& tensors, const fs::path& where) {
  for (const Tensor& t : tensors) {
    const std::string what = "writing tensor " + t.name;
    std::vector<hsize_t> dims(t.shape.begin(), t.shape.end());
    Handle space = hdf5::checkedSpace(
        dims.empty() ? H5Screate(H5S_SCALAR)
                     : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
        where, what);
    Handle dataset =
        hdf5::checkedDataset(H5Dcreate2(group, t.name.c_str(), H5T_IEEE_F32LE, space.get(),
                                        H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                             where, what);
    if (!t.values.empty()) {
      check(
          H5Dwrite(dataset.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, t.values.data()),
          where, what);
    }
    dataset.close(where, what);
  }
}

// The names of a group's tensors, in order, one per line (each line ends in a newline, so a
// name ending in spaces survives the string reader's trimming of padding).
std::string memberList(const std::vector<Tensor>& tensors) {
  std::string text;
  for (const Tensor& t : tensors)
    text += t.name + "\n";
  return text;
}

void writeRngState(hid_t file, const std::vector<std::uint64_t>& words, const fs::path& where) {
  const hsize_t count = words.size();
  Handle space = hdf5::checkedSpace(H5Screate_simple(1, &count, nullptr), where, "rng_state");
  Handle dataset = hdf5::checkedDataset(H5Dcreate2(file, "rng_state", H5T_STD_U64LE, space.get(),
                                                   H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                                        where, "writing rng_state");
  if (!words.empty()) {
    check(H5Dwrite(dataset.get(), H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, words.data()),
          where, "writing rng_state");
  }
  dataset.close(where, "writing rng_state");
}

std::vector<std::uint8_t> encodeHdf5(const CheckpointContent& c) {
  // The core driver builds the file in memory (no backing store): the bytes are then written in
  // one piece by the caller, who controls the temporary name, the fsync and the crash points.
  static std::atomic<unsigned> images{0};
  const fs::path where = "checkpoint image of step " + std::to_string(c.step);
  const std::string name = "ringtrain-checkpoint-" + std::to_string(getpid()) + "-" +
                           std::to_string(images.fetch_add(1));
  Hdf5Scope scope;
  Handle access = hdf5::checkedProperties(H5Pcreate(H5P_FILE_ACCESS), where, "property list");
  check(H5Pset_fapl_core(access.get(), std::size_t{1} << 20, false), where, "core driver");
  Handle file = hdf5::checkedFile(H5Fcreate(name.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, access.get()),
                                  where, "creating the HDF5 image");
  const hid_t f = file.get();
  hdf5::writeStringAttribute(f, "format", kFormatName, where);
  hdf5::writeIntegerAttribute(f, "format_version", kFormatVersion, where);
  hdf5::writeIntegerAttribute(f, "step", c.step, where);
  hdf5::writeIntegerAttribute(f, "epoch", c.epoch, where);
  hdf5::writeIntegerAttribute(f, "sampler_epoch", c.sampler.epoch, where);
  hdf5::writeIntegerAttribute(f, "sampler_step", c.sampler.step, where);
  hdf5::writeUnsignedAttribute(f, "seed", c.seed, where);
  hdf5::writeIntegerAttribute(f, "world_size", c.worldSize, where);
  hdf5::writeIntegerAttribute(f, "batch_size", c.batchSize, where);
  hdf5::writeStringDataset(f, "config", c.config, where);
  hdf5::writeStringDataset(f, "model_layout", c.modelLayout, where);
  writeRngState(f, c.rngState, where);
  hdf5::writeStringDataset(f, "parameter_names", memberList(c.parameters), where);
  hdf5::writeStringDataset(f, "optimizer_state_names", memberList(c.optimizerState), where);
  {
    Handle parameters = createOrderedGroup(f, "parameters", where);
    writeTensors(parameters.get(), c.parameters, where);
    parameters.close(where, "closing /parameters");
  }
  {
    Handle optimizer = createOrderedGroup(f, "optimizer", where);
    hdf5::writeStringAttribute(optimizer.get(), "kind", c.optimizerKind, where);
    hdf5::writeIntegerAttribute(optimizer.get(), "steps", c.optimizerSteps, where);
    writeTensors(optimizer.get(), c.optimizerState, where);
    optimizer.close(where, "closing /optimizer");
  }
  check(H5Fflush(f, H5F_SCOPE_GLOBAL), where, "flushing the HDF5 image");
  const ssize_t size = check(H5Fget_file_image(f, nullptr, 0), where, "sizing the HDF5 image");
  std::vector<std::uint8_t> image(static_cast<std::size_t>(size));
  check(H5Fget_file_image(f, image.data(), image.size()), where, "copying the HDF5 image");
  file.close(where, "closing the HDF5 image");
  return image;
}

// ---- Reading the HDF5 part ------------------------------------------------------------------

std::int64_t requiredInteger(hid_t object, const char* name, std::int64_t low, std::int64_t high,
                             const fs::path& file) {
  const std::optional<std::int64_t> value = hdf5::readIntegerAttribute(object, name, file);
  if (!value) fail(file, std::string("no attribute ") + name);
  if (*value < low || *value > high) {
    fail(file, std::string("attribute ") + name + " is " + std::to_string(*value) + "; expected " +
                   std::to_string(low) + " to " + std::to_string(high));
  }
  return *value;
}

Handle openGroup(hid_t file, const char* name, const fs::path& where) {
  if (check(H5Lexists(file, name, H5P_DEFAULT), where, std::string("looking for /") + name) == 0) {
    fail(where, std::string("no group /") + name);
  }
  return hdf5::checkedGroup(H5Gopen2(file, name, H5P_DEFAULT), where,
                            std::string("/") + name + " is not a group");
}

// Text from the file, quoted in a message: at most 160 bytes, control characters as '?', so the
// message stays one line whatever the file holds.
std::string clipped(std::string_view line) {
  constexpr std::size_t kMax = 160;
  std::string text(line.substr(0, kMax));
  for (char& c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  return line.size() <= kMax ? text : text + "...";
}

std::vector<std::string_view> splitLines(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    const std::size_t end = text.find('\n');
    lines.push_back(text.substr(0, end));
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return lines;
}

// The member names of /parameters or /optimizer, in order, as the list written beside the group
// (/parameter_names, /optimizer_state_names) gives them, after checking that the group holds
// exactly those members. The list, not the group, is what is enumerated: libhdf5 1.10 lists a
// group by index (H5Lget_name_by_idx, H5Literate) through a table of its link messages that it
// frees uninitialised when a message fails to decode part-way (H5G__compact_build_table, fixed
// in 1.14), so a forged file crashed the reader; a lookup by name walks the messages without it.
std::vector<std::string> memberNames(hid_t file, hid_t group, const char* listName,
                                     const std::string& path, std::uint64_t imageBytes,
                                     const fs::path& where) {
  const std::string list = hdf5::readStringDataset(file, listName, where, imageBytes);
  if (!list.empty() && list.back() != '\n') {
    fail(where, std::string("/") + listName + " does not end in a newline");
  }
  std::vector<std::string> names;
  for (const std::string_view name : splitLines(list)) {
    if (name.empty() || name == "." || name.find('/') != std::string_view::npos ||
        name.size() > kMaxNameBytes) {
      fail(where, std::string("/") + listName + " holds a name that is not a tensor name: \"" +
                      clipped(name) + "\"");
    }
    names.emplace_back(name);
  }
  std::vector<std::string_view> sorted(names.begin(), names.end());
  std::sort(sorted.begin(), sorted.end());
  if (const auto twice = std::adjacent_find(sorted.begin(), sorted.end()); twice != sorted.end()) {
    fail(where, std::string("/") + listName + " names \"" + clipped(*twice) + "\" twice");
  }
  H5G_info_t info{};
  check(H5Gget_info(group, &info), where, "listing " + path);
  if (info.nlinks != names.size()) {
    fail(where, path + " has " + std::to_string(info.nlinks) + " members but /" + listName +
                    " names " + std::to_string(names.size()));
  }
  return names;
}

// A float32 tensor of at most `budget` values, which it then uses up: every value of every
// tensor is stored in the file, so all of them together fit in its bytes, and nothing is
// allocated for a shape the file cannot hold.
Tensor readTensor(hid_t group, const std::string& name, const std::string& path,
                  std::uint64_t& budget, const fs::path& file) {
  const std::string where = path + "/" + name;
  Handle dataset = hdf5::checkedDataset(H5Dopen2(group, name.c_str(), H5P_DEFAULT), file,
                                        where + " is not a dataset");
  Handle type = hdf5::checkedType(H5Dget_type(dataset.get()), file, "reading " + where);
  if (H5Tget_class(type.get()) != H5T_FLOAT || H5Tget_size(type.get()) != 4) {
    fail(file, where + " has type " + hdf5::describeType(type.get()) + "; expected float32");
  }
  Handle space = hdf5::checkedSpace(H5Dget_space(dataset.get()), file, "reading " + where);
  const int rank = check(H5Sget_simple_extent_ndims(space.get()), file, "reading " + where);
  if (rank > kMaxRank) fail(file, where + " has " + std::to_string(rank) + " dimensions");
  std::array<hsize_t, kMaxRank> dims{};
  check(H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr), file, "reading " + where);
  Tensor tensor;
  tensor.name = name;
  std::uint64_t count = 1;
  for (int d = 0; d < rank; ++d) {
    const hsize_t size = dims[static_cast<std::size_t>(d)];
    if (__builtin_mul_overflow(count, size, &count) || count > budget) {
      fail(file, where + " claims more values than the file has room for");
    }
    tensor.shape.push_back(static_cast<std::int64_t>(size));
  }
  if (H5Sget_simple_extent_type(space.get()) == H5S_NULL) count = 0;
  budget -= count;
  tensor.values.resize(count);
  if (count > 0) {
    check(H5Dread(dataset.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                  tensor.values.data()),
          file, "reading " + where);
  }
  return tensor;
}

std::vector<Tensor> readTensors(hid_t file, const char* groupName, const char* listName,
                                std::uint64_t imageBytes, std::uint64_t& budget,
                                const fs::path& where) {
  Handle group = openGroup(file, groupName, where);
  const std::string path = std::string("/") + groupName;
  std::vector<Tensor> tensors;
  for (const std::string& name :
       memberNames(file, group.get(), listName, path, imageBytes, where)) {
    tensors.push_back(readTensor(group.get(), name, path, budget, where));
  }
  return tensors;
}

std::vector<std::uint64_t> readRngState(hid_t file, std::uint64_t imageBytes,
                                        const fs::path& where) {
  if (check(H5Lexists(file, "rng_state", H5P_DEFAULT), where, "looking for /rng_state") == 0) {
    fail(where, "no dataset /rng_state");
  }
  Handle dataset = hdf5::checkedDataset(H5Dopen2(file, "rng_state", H5P_DEFAULT), where,
                                        "/rng_state is not a dataset");
  Handle type = hdf5::checkedType(H5Dget_type(dataset.get()), where, "reading /rng_state");
  if (H5Tget_class(type.get()) != H5T_INTEGER) {
    fail(where, "/rng_state has type " + hdf5::describeType(type.get()) + "; expected uint64");
  }
  Handle space = hdf5::checkedSpace(H5Dget_space(dataset.get()), where, "reading /rng_state");
  if (check(H5Sget_simple_extent_ndims(space.get()), where, "reading /rng_state") != 1) {
    fail(where, "/rng_state is not one-dimensional");
  }
  hsize_t count = 0;
  check(H5Sget_simple_extent_dims(space.get(), &count, nullptr), where, "reading /rng_state");
  if (count > imageBytes / 8) fail(where, "/rng_state claims more values than the file holds");
  std::vector<std::uint64_t> words(count);
  if (count > 0) {
    check(H5Dread(dataset.get(), H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, words.data()),
          where, "reading /rng_state");
  }
  return words;
}

void checkLayout(std::string_view saved, std::string_view expected, const fs::path& file) {
  if (expected.empty() || saved == expected) return;
  const auto a = splitLines(saved);
  const auto b = splitLines(expected);
  std::size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i])
    ++i;
  const std::string savedLine = i < a.size() ? "\"" + clipped(a[i]) + "\"" : "nothing";
  const std::string expectedLine = i < b.size() ? "\"" + clipped(b[i]) + "\"" : "nothing";
  fail(file, "saved from another model layout: line " + std::to_string(i + 1) + " is " + savedLine +
                 " in the checkpoint but " + expectedLine + " in this run");
}

CheckpointContent decodeHdf5(std::span<const std::uint8_t> image, std::int64_t headerStep,
                             const fs::path& file) {
  static std::atomic<unsigned> opened{0};
  // A unique name per open: the core driver takes two open files of one name for the same file.
  const std::string name = file.string() + "#" + std::to_string(opened.fetch_add(1));
  const std::uint64_t size = image.size();
  Hdf5Scope scope;
  Handle access = hdf5::checkedProperties(H5Pcreate(H5P_FILE_ACCESS), file, "property list");
  check(H5Pset_fapl_core(access.get(), std::size_t{1} << 16, false), file, "core driver");
  check(H5Pset_file_image(access.get(), const_cast<std::uint8_t*>(image.data()), image.size()),
        file, "file image");
  Handle handle = hdf5::checkedFile(H5Fopen(name.c_str(), H5F_ACC_RDONLY, access.get()), file,
                                    "the HDF5 part does not open");
  const hid_t f = handle.get();
  const std::optional<std::string> format =
      hdf5::readStringAttribute(f, "format", file, kMaxNameBytes);
  if (format != kFormatName) fail(file, "not a ringtrain checkpoint (no format attribute)");
  requiredInteger(f, "format_version", kFormatVersion, kFormatVersion, file);
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  CheckpointContent c;
  c.step = requiredInteger(f, "step", 0, kMax, file);
  if (c.step != headerStep) {
    fail(file, "step " + std::to_string(c.step) + " differs from the header's " +
                   std::to_string(headerStep));
  }
  c.epoch = requiredInteger(f, "epoch", 0, kMax, file);
  c.sampler.epoch = requiredInteger(f, "sampler_epoch", 0, kMax, file);
  c.sampler.step = requiredInteger(f, "sampler_step", 0, kMax, file);
  const std::optional<std::uint64_t> seed = hdf5::readUnsignedAttribute(f, "seed", file);
  if (!seed) fail(file, "no attribute seed");
  c.seed = *seed;
  c.worldSize =
      static_cast<int>(requiredInteger(f, "world_size", 1, std::numeric_limits<int>::max(), file));
  c.batchSize = requiredInteger(f, "batch_size", 0, kMax, file);
  c.config = hdf5::readStringDataset(f, "config", file, size);
  c.modelLayout = hdf5::readStringDataset(f, "model_layout", file, size);
  c.rngState = readRngState(f, size, file);
  std::uint64_t budget = size / 4;  // float32 values the file has room for
  c.parameters = readTensors(f, "parameters", "parameter_names", size, budget, file);
  c.optimizerState = readTensors(f, "optimizer", "optimizer_state_names", size, budget, file);
  Handle optimizer = openGroup(f, "optimizer", file);
  const std::optional<std::string> kind =
      hdf5::readStringAttribute(optimizer.get(), "kind", file, kMaxKindBytes);
  if (!kind) fail(file, "no attribute kind on /optimizer");
  c.optimizerKind = *kind;
  c.optimizerSteps = requiredInteger(optimizer.get(), "steps", 0, kMax, file);
  return c;
}

// ---- The folder -------------------------------------------------------------------------------

// The step of a checkpoint file name "ckpt-<digits>.h5", or nullopt for any other name.
std::optional<std::int64_t> stepOfName(std::string_view name) {
  if (!name.starts_with(kCheckpointPrefix) || !name.ends_with(kCheckpointSuffix)) {
    return std::nullopt;
  }
  const std::string_view digits = name.substr(
      kCheckpointPrefix.size(), name.size() - kCheckpointPrefix.size() - kCheckpointSuffix.size());
  if (digits.empty()) return std::nullopt;
  std::int64_t step = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), step);
  if (error != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return step;
}

struct Listed {
  std::int64_t step;
  fs::path path;
};

// The folder's checkpoint files, the highest step first.
std::vector<Listed> listCheckpoints(const fs::path& dir) {
  std::vector<Listed> found;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (const auto step = stepOfName(it->path().filename().string())) {
      found.push_back({*step, it->path()});
    }
  }
  if (ec) fail(dir, "cannot list the checkpoint folder: " + ec.message());
  std::sort(found.begin(), found.end(),
            [](const Listed& a, const Listed& b) { return a.step > b.step; });
  return found;
}

bool isTemporaryName(std::string_view name) {
  return name.starts_with(".") && name.find(kTemporaryMarker) != std::string_view::npos &&
         (name.starts_with(".ckpt-") || name.starts_with(".latest"));
}

std::string readLatest(const fs::path& dir) {
  // Only a hint for the log: anything but a regular file (a FIFO would block open) is no hint.
  if (base::regularFileProblem(dir / kLatestName)) return "";
  const int fd = ::open((dir / kLatestName).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  char text[256];
  const ssize_t n = ::read(fd, text, sizeof text);
  ::close(fd);
  if (n <= 0) return "";
  std::string name(text, static_cast<std::size_t>(n));
  while (!name.empty() && (name.back() == '\n' || name.back() == '\r' || name.back() == ' '))
    name.pop_back();
  return name;
}

[[noreturn]] void crashNow() {
  std::raise(SIGKILL);
  std::_Exit(kExitKilled);  // not reached: SIGKILL cannot be caught
}

void crashIf(CrashPoint at, CrashPoint here) {
  if (at != CrashPoint::kNone && at == here) crashNow();
}

std::string temporaryName(const std::string& name) {
  return "." + name + std::string(kTemporaryMarker) + std::to_string(static_cast<long>(getpid()));
}

// Writes `bytes` under a temporary name and renames it to dir/name, durably. On failure the
// temporary is removed and CheckpointError thrown; the crash points sit between the stages.
void replaceDurably(const fs::path& dir, const std::string& name,
                    std::span<const std::uint8_t> bytes, CrashPoint crashAt,
                    CrashPoint partialPoint, CrashPoint beforeRenamePoint) {
  const fs::path temporary = dir / temporaryName(name);
  std::error_code ignored;
  fs::remove(temporary, ignored);  // a leftover of a writer that had our process id
  try {
    if (crashAt != CrashPoint::kNone && crashAt == partialPoint) {
      formats::writeNewFileDurably(temporary, bytes.first(bytes.size() / 2));
      crashNow();
    }
    formats::writeNewFileDurably(temporary, bytes);
    crashIf(crashAt, beforeRenamePoint);
    formats::renameDurably(temporary, dir / name);
  } catch (const formats::FormatError& e) {
    fs::remove(temporary, ignored);
    throw CheckpointError(e.what());
  }
}

// Removes the checkpoints of `own` (this writer's, the new one among them) beyond the newest
// `keep`, and stale temporaries; lists the folder's other checkpoints in result.keptOthers.
void prune(const fs::path& dir, std::vector<fs::path>& own, int keep, CrashPoint crashAt,
           CheckpointWriteResult& result) {
  const auto removeOne = [&](const fs::path& path) {
    std::error_code ec;
    if (fs::remove(path, ec)) {
      result.removed.push_back(path);
    } else if (ec) {
      result.warnings.push_back(path.string() + ": cannot remove: " + ec.message());
    }
  };
  int kept = 1;  // the new checkpoint
  for (const Listed& listed : listCheckpoints(dir)) {
    const auto mine = std::find(own.begin(), own.end(), listed.path);
    if (mine == own.end()) {
      result.keptOthers.push_back(listed.path);
    } else if (listed.path == result.path || keep == 0 || kept < keep) {
      kept += listed.path == result.path ? 0 : 1;
    } else {
      removeOne(listed.path);
      own.erase(mine);
      crashIf(crashAt, CrashPoint::kDuringPrune);
    }
  }
  // Temporaries are only ever this writer's, and its own are renamed by now: anything left is
  // from a writer that died.
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (isTemporaryName(it->path().filename().string())) removeOne(it->path());
  }
  if (!result.removed.empty()) {
    try {
      formats::syncFolder(dir);
    } catch (const formats::FormatError& e) {
      result.warnings.push_back(e.what());
    }
  }
}

}  // namespace

std::string_view crashPointName(CrashPoint point) {
  switch (point) {
    case CrashPoint::kNone:
      return "none";
    case CrashPoint::kDuringTemporaryWrite:
      return "during-temporary-write";
    case CrashPoint::kBeforeRename:
      return "before-rename";
    case CrashPoint::kBeforeLatest:
      return "before-latest";
    case CrashPoint::kBeforeLatestRename:
      return "before-latest-rename";
    case CrashPoint::kBeforePrune:
      return "before-prune";
    case CrashPoint::kDuringPrune:
      return "during-prune";
  }
  return "none";
}

std::optional<CrashPoint> crashPointFromName(std::string_view name) {
  for (const CrashPoint point :
       {CrashPoint::kNone, CrashPoint::kDuringTemporaryWrite, CrashPoint::kBeforeRename,
        CrashPoint::kBeforeLatest, CrashPoint::kBeforeLatestRename, CrashPoint::kBeforePrune,
        CrashPoint::kDuringPrune}) {
    if (crashPointName(point) == name) return point;
  }
  return std::nullopt;
}

std::string checkpointFileName(std::int64_t step) {
  char name[40];
  std::snprintf(name, sizeof name, "ckpt-%08lld.h5", static_cast<long long>(step));
  return name;
}

std::vector<std::uint8_t> encodeCheckpoint(const CheckpointContent& content) {
  if (content.step < 0 || content.epoch < 0 || content.sampler.epoch < 0 ||
      content.sampler.step < 0 || content.worldSize < 1 || content.batchSize < 0 ||
      content.optimizerSteps < 0 || content.optimizerKind.size() > kMaxKindBytes) {
    throw std::invalid_argument(
        "writeCheckpoint: negative counters, no ranks or an optimiser kind over 64 bytes");
  }
  validateTensors(content.parameters, "parameter");
  validateTensors(content.optimizerState, "optimiser state");
  const std::vector<std::uint8_t> image = encodeHdf5(content);
  std::vector<std::uint8_t> bytes = encodeHeader(image.size(), crc32c(image), content.step);
  bytes.insert(bytes.end(), image.begin(), image.end());
  return bytes;
}

CheckpointWriter::CheckpointWriter(fs::path dir, int keep) : dir_(std::move(dir)), keep_(keep) {
  if (keep < 0) throw std::invalid_argument("CheckpointWriter: keep is negative");
}

CheckpointWriteResult CheckpointWriter::write(const CheckpointContent& content,
                                              CrashPoint crashAt) {
  const fs::path& dir = dir_;
  const std::vector<std::uint8_t> bytes = encodeCheckpoint(content);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail(dir, "cannot create the checkpoint folder: " + ec.message());

  CheckpointWriteResult result;
  const std::string name = checkpointFileName(content.step);
  result.path = dir / name;
  replaceDurably(dir, name, bytes, crashAt, CrashPoint::kDuringTemporaryWrite,
                 CrashPoint::kBeforeRename);
  // Ours from here on, also when it replaced a file of that name (the same step rewritten).
  if (std::find(written_.begin(), written_.end(), result.path) == written_.end()) {
    written_.push_back(result.path);
  }
  crashIf(crashAt, CrashPoint::kBeforeLatest);
  // The checkpoint is complete from here on: what follows can only warn.
  const std::string latest = name + "\n";
  try {
    replaceDurably(dir, kLatestName,
                   std::span(reinterpret_cast<const std::uint8_t*>(latest.data()), latest.size()),
                   crashAt, CrashPoint::kNone, CrashPoint::kBeforeLatestRename);
  } catch (const CheckpointError& e) {
    result.warnings.push_back(e.what());
  }
  crashIf(crashAt, CrashPoint::kBeforePrune);
  prune(dir, written_, keep_, crashAt, result);
  return result;
}

namespace {

// The HDF5 part of a checkpoint's bytes, once its CRC-32C matches the header's.
std::span<const std::uint8_t> checkedImage(std::span<const std::uint8_t> bytes,
                                           const Header& header, const fs::path& name) {
  const std::span<const std::uint8_t> image = bytes.subspan(kHeaderBytes);
  const std::uint32_t actual = crc32c(image);
  if (actual != header.imageCrc) {
    fail(name, "checksum mismatch: the data has CRC-32C " + hex32(actual) +
                   " but the header says " + hex32(header.imageCrc) + " (the file is damaged)");
  }
  return image;
}

}  // namespace

CheckpointContent parseCheckpoint(std::span<const std::uint8_t> bytes, const fs::path& name,
                                  std::string_view expectedModelLayout) {
  const Header header =
      decodeHeader(bytes.first(std::min(bytes.size(), kHeaderBytes)), bytes.size(), name);
  const std::span<const std::uint8_t> image = checkedImage(bytes, header, name);
  CheckpointContent content;
  try {
    content = decodeHdf5(image, header.step, name);
  } catch (const CheckpointError&) {
    throw;
  } catch (const formats::FormatError& e) {
    throw CheckpointError(e.what());
  }
  checkLayout(content.modelLayout, expectedModelLayout, name);
  return content;
}

CheckpointContent readCheckpoint(const fs::path& path, std::string_view expectedModelLayout) {
  if (auto problem = base::regularFileProblem(path)) fail(path, *problem);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path, std::string("cannot open: ") + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat info {};
  if (::fstat(fd, &info) != 0) fail(path, std::string("cannot stat: ") + std::strerror(errno));
  if (!S_ISREG(info.st_mode)) fail(path, "not a regular file");
  const auto fileBytes = static_cast<std::uint64_t>(info.st_size);
  // Read and check the header before allocating for the rest: the size comes from the file
  // system, and the header must agree with it, so a huge stray file costs nothing.
  const auto readAt = [&](std::uint8_t* into, std::size_t count, std::uint64_t offset) {
    if (auto problem = base::readExactly(fd, into, count, offset)) fail(path, *problem);
  };
  std::vector<std::uint8_t> bytes(std::min<std::uint64_t>(fileBytes, kHeaderBytes));
  readAt(bytes.data(), bytes.size(), 0);
  const Header header = decodeHeader(bytes, fileBytes, path);
  bytes.resize(fileBytes);
  readAt(bytes.data() + kHeaderBytes, bytes.size() - kHeaderBytes, kHeaderBytes);
  // A damaged file is refused here; one whose checksum holds goes to libhdf5, which a forged
  // file can crash (formats/separate_check.h): a child process reads it first.
  checkedImage(bytes, header, path);
  formats::checkInSeparateProcess("checkpoint", path);
  return parseCheckpoint(bytes, path, expectedModelLayout);
}

std::vector<std::int64_t> checkpointSteps(const fs::path& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return {};
  std::vector<std::int64_t> steps;
  for (const Listed& listed : listCheckpoints(dir))
    steps.push_back(listed.step);
  return steps;
}

std::optional<ResumePlan> findCheckpointToResume(const fs::path& dir,
                                                 std::string_view expectedModelLayout,
                                                 const TakeCheckpoint& take) {
  std::error_code ec;
  const auto status = fs::status(dir, ec);
  if (!fs::exists(status)) return std::nullopt;
  if (!fs::is_directory(status)) fail(dir, "not a folder");
  const std::vector<Listed> candidates = listCheckpoints(dir);
  if (candidates.empty()) return std::nullopt;
  ResumePlan plan;
  plan.latest = readLatest(dir);
  for (const Listed& candidate : candidates) {
    try {
      plan.content = readCheckpoint(candidate.path, expectedModelLayout);
      if (take) take(plan.content, candidate.path);
      plan.path = candidate.path;
      return plan;
    } catch (const formats::FormatError& e) {
      plan.skipped.push_back(e.what());
    }
  }
  std::string reasons;
  for (const std::string& reason : plan.skipped)
    reasons += (reasons.empty() ? "" : "; ") + reason;
  fail(dir, "no usable checkpoint among " + std::to_string(candidates.size()) + ": " + reasons);
}

std::optional<ResumePlan> resolveResume(const std::string& resume, const fs::path& checkpointDir,
                                        std::string_view expectedModelLayout,
                                        const TakeCheckpoint& take) {
  if (resume == "auto") return findCheckpointToResume(checkpointDir, expectedModelLayout, take);
  std::error_code ec;
  if (fs::is_directory(resume, ec)) {
    std::optional<ResumePlan> plan = findCheckpointToResume(resume, expectedModelLayout, take);
    if (!plan) fail(resume, "no checkpoint (ckpt-*.h5) in this folder");
    return plan;
  }
  ResumePlan plan;
  plan.path = resume;
  plan.content = readCheckpoint(resume, expectedModelLayout);
  if (take) take(plan.content, plan.path);
  return plan;
}

std::string describeResume(const ResumePlan& plan) {
  const CheckpointContent& c = plan.content;
  std::string text = "resuming from " + plan.path.string() + " (step " + std::to_string(c.step) +
                     ", epoch " + std::to_string(c.epoch) + ", written by " +
                     std::to_string(c.worldSize) + " rank" + (c.worldSize == 1 ? "" : "s") + ")";
  if (!plan.latest.empty() && plan.latest != plan.path.filename().string()) {
    text += "; `latest` names " + plan.latest;
  }
  for (const std::string& skipped : plan.skipped)
    text += "; skipped " + skipped;
  return text;
}

std::vector<std::string> configChanges(std::string_view saved, std::string_view current) {
  // "name = value" lines are matched by name; any other line only by being in both texts or not.
  struct Line {
    std::string_view key;
    std::string_view value;  // the whole line when it has no " = "
    bool keyed;
  };
  const auto parse = [](std::string_view text) {
    std::vector<Line> lines;
    for (const std::string_view line : splitLines(text)) {
      const std::size_t equals = line.find(" = ");
      if (equals == std::string_view::npos) {
        lines.push_back({line, line, false});
      } else {
        lines.push_back({line.substr(0, equals), line.substr(equals + 3), true});
      }
    }
    return lines;
  };
  const std::vector<Line> before = parse(saved);
  const std::vector<Line> after = parse(current);
  const auto find = [](const std::vector<Line>& lines, const Line& wanted) {
    return std::find_if(lines.begin(), lines.end(), [&](const Line& line) {
      return line.keyed == wanted.keyed && line.key == wanted.key;
    });
  };
  const auto quote = [](const Line& line) { return std::string(line.value); };
  std::vector<std::string> changes;
  for (const Line& line : before) {
    const auto match = find(after, line);
    if (!line.keyed) {
      if (match == after.end()) changes.push_back("removed: " + quote(line));
    } else if (match == after.end()) {
      changes.push_back(std::string(line.key) + ": " + quote(line) + " -> (not set)");
    } else if (match->value != line.value) {
      changes.push_back(std::string(line.key) + ": " + quote(line) + " -> " + quote(*match));
    }
  }
  for (const Line& line : after) {
    if (find(before, line) != before.end()) continue;
    changes.push_back(line.keyed ? std::string(line.key) + ": (not set) -> " + quote(line)
                                 : "added: " + quote(line));
  }
  return changes;
}

}  // namespace ringtrain::storage
