// Shared pieces of the data tests: a temporary folder, raw file writes (for files no writer of
// ours would produce), a check of DataError messages and a gather into fresh buffers.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "data/data_error.h"
#include "data/dataset.h"

namespace ringtrain::data::testing {

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

// The message of the DataError `action` throws ("" and a test failure when it throws none).
inline std::string dataErrorOf(const std::function<void()>& action) {
  try {
    action();
  } catch (const DataError& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.find('\n'), std::string::npos) << "not one line: " << message;
    return message;
  }
  ADD_FAILURE() << "no DataError thrown";
  return "";
}

// What Dataset::gather writes for `indices`: the samples and their labels.
struct Gathered {
  std::vector<float> images;
  std::vector<std::int32_t> labels;
};

inline Gathered gatherAll(const Dataset& dataset, const std::vector<std::int64_t>& indices) {
  Gathered g;
  g.images.resize(indices.size() * static_cast<std::size_t>(dataset.sampleShape().elements()));
  g.labels.resize(indices.size() * static_cast<std::size_t>(dataset.labelsPerSample()));
  dataset.gather(indices, g.images.data(), g.labels.data());
  return g;
}

}  // namespace ringtrain::data::testing
