// Shared pieces of the tests of files (formats/, data/, storage/): a temporary folder, raw
// file writes and reads (for files no writer of ours would produce), a check of bad-input error
// messages, a bitwise CRC-32C written independently of the library's table-driven one, and raw
// HDF5 files of any shape and type.
#pragma once

#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "formats/format_error.h"

namespace ringtrain::formats::testing {

// A fresh folder under the system's temporary folder, removed with everything in it at the end.
class TempFolder {
 public:
  TempFolder() {
    std::string pattern = (std::filesystem::temp_directory_path() / "ringtrain_data_XXXXXX");
    if (!mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempFolder() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempFolder(const TempFolder&) = delete;
  TempFolder& operator=(const TempFolder&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

// Writes exactly these bytes, with no compression whatever the name.
inline void writeRaw(const std::filesystem::path& path, std::span<const std::uint8_t> bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

inline std::vector<std::uint8_t> readRaw(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The message of the bad-input error `action` throws -- a FormatError: one of formats/, a
// data::DataError or a storage::CheckpointError -- ("" and a test failure when it throws none).
inline std::string errorOf(const std::function<void()>& action) {
  try {
    action();
  } catch (const FormatError& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.find('\n'), std::string::npos) << "not one line: " << message;
    return message;
  }
  ADD_FAILURE() << "no FormatError thrown";
  return "";
}

// CRC-32C one bit at a time, straight from the definition (reflected polynomial 0x82F63B78).
inline std::uint32_t referenceCrc32c(std::span<const std::uint8_t> bytes) {
  std::uint32_t crc = 0xffffffffu;
  for (const std::uint8_t byte : bytes) {
    crc ^= byte;
    for (int bit = 0; bit < 8; ++bit)
      crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
  }
  return ~crc;
}

inline std::uint32_t referenceMaskedCrc32c(std::span<const std::uint8_t> bytes) {
  const std::uint32_t crc = referenceCrc32c(bytes);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

// A raw HDF5 file built call by call, every call checked (a test helper failing is a test bug).
class RawHdf5File {
 public:
  explicit RawHdf5File(const std::filesystem::path& path)
      : file_(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT)) {
    ok(file_, "H5Fcreate");
  }
  ~RawHdf5File() {
    if (file_ >= 0) H5Fclose(file_);
  }
  RawHdf5File(const RawHdf5File&) = delete;
  RawHdf5File& operator=(const RawHdf5File&) = delete;

  hid_t id() const { return file_; }

  // A dataset of `dims` of `fileType`, filled from `values` given as `memoryType` (or left
  // unwritten when values is null). chunk: chunked storage with these chunk dimensions.
  void dataset(const char* name, hid_t fileType, const std::vector<hsize_t>& dims,
               hid_t memoryType = -1, const void* values = nullptr,
               const std::vector<hsize_t>& chunk = {}) {
    const hid_t space = dims.empty()
                            ? H5Screate(H5S_SCALAR)
                            : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
    const hid_t create = H5Pcreate(H5P_DATASET_CREATE);
    if (!chunk.empty())
      ok(H5Pset_chunk(create, static_cast<int>(chunk.size()), chunk.data()), "chunk");
    const hid_t dataset =
        H5Dcreate2(file_, name, fileType, space, H5P_DEFAULT, create, H5P_DEFAULT);
    ok(dataset, "H5Dcreate2");
    if (values) ok(H5Dwrite(dataset, memoryType, H5S_ALL, H5S_ALL, H5P_DEFAULT, values), "write");
    H5Dclose(dataset);
    H5Pclose(create);
    H5Sclose(space);
  }

  void integerAttribute(const char* name, std::int64_t value) {
    scalarAttribute(name, H5T_STD_I64LE, H5T_NATIVE_INT64, &value);
  }
  void floatAttribute(const char* name, double value) {
    scalarAttribute(name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &value);
  }
  // A variable-length UTF-8 string, as h5py writes str attributes.
  void variableStringAttribute(const char* name, const char* text) {
    const hid_t type = H5Tcopy(H5T_C_S1);
    ok(H5Tset_size(type, H5T_VARIABLE), "H5Tset_size");
    ok(H5Tset_cset(type, H5T_CSET_UTF8), "H5Tset_cset");
    scalarAttribute(name, type, type, &text);
    H5Tclose(type);
  }

 private:
  static void ok(std::int64_t result, const char* call) {
    if (result < 0) throw std::runtime_error(std::string("test HDF5 helper: ") + call + " failed");
  }
  void scalarAttribute(const char* name, hid_t fileType, hid_t memoryType, const void* value) {
    const hid_t space = H5Screate(H5S_SCALAR);
    const hid_t attribute = H5Acreate2(file_, name, fileType, space, H5P_DEFAULT, H5P_DEFAULT);
    ok(attribute, "H5Acreate2");
    ok(H5Awrite(attribute, memoryType, value), "H5Awrite");
    H5Aclose(attribute);
    H5Sclose(space);
  }

  hid_t file_;
};

}  // namespace ringtrain::formats::testing
