// The HDF5 part of a checkpoint file (checkpoint.h lists its datasets and attributes): built in
// memory with HDF5's core driver, and read back from the file's bytes with every entry checked.
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "formats/hdf5_support.h"
#include "storage/checkpoint_format.h"

namespace ringtrain::storage::checkpoint_format {
namespace {

namespace fs = std::filesystem;
namespace hdf5 = formats::hdf5;
using formats::hdf5::check;
using formats::hdf5::Handle;
using formats::hdf5::Hdf5Scope;

constexpr const char* kFormatName = "ringtrain checkpoint";
constexpr std::size_t kMaxNameBytes = 1024;
constexpr int kMaxRank = 8;

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

}  // namespace

std::vector<std::uint8_t> encodeHdf5(const CheckpointContent& c) {
  validateTensors(c.parameters, "parameter");
  validateTensors(c.optimizerState, "optimiser state");
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

namespace {

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

}  // namespace

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

namespace {

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

}  // namespace

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

}  // namespace ringtrain::storage::checkpoint_format
