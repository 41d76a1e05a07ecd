// Named float32 tensors in the safetensors format (https://huggingface.co/docs/safetensors), the
// weights file other tools read: PyTorch's `safetensors.torch.load_file`, Hugging Face, or ten
// lines of json and struct.
//
// Layout: 8 bytes, the header's length N (unsigned, little-endian); N bytes of JSON, an object
// mapping each tensor's name to {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]},
// plus "__metadata__" (string to string), padded with spaces so that the data starts at a
// multiple of 8; then the data, each tensor's values row-major (C order) and little-endian at
// [begin, end) of the bytes after the header, the tensors back to back, no gap, no overlap.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "storage/checkpoint.h"

namespace ringtrain::storage {

struct SafetensorsContent {
  std::vector<Tensor> tensors;  // in the order of their data
  std::map<std::string, std::string> metadata;
};

// The file's bytes. Throws std::invalid_argument for a tensor whose shape does not match its
// values, an empty name, a name given twice or the name "__metadata__".
std::vector<std::uint8_t> encodeSafetensors(const SafetensorsContent& content);

// Writes `path` whole or not at all (a temporary beside it, then a rename), replacing a file of
// that name. Throws CheckpointError naming the file when it cannot be written.
void writeSafetensors(const std::filesystem::path& path, const SafetensorsContent& content);

// Where one tensor's values lie in the data (the bytes after the header), as the header says.
struct SafetensorsEntry {
  std::string name;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0;  // bytes into the data
  std::uint64_t end = 0;
  std::uint64_t count() const { return (end - begin) / sizeof(float); }
};

// An open safetensors file whose header has been read and checked as the specification asks
// (header length within the readers' 100 MB limit and within the file, a JSON object, every
// tensor F32, its offsets in range and sized by its shape, the tensors covering the data without
// gap or overlap) -- against the file's size, before any tensor's data is read. Errors throw
// CheckpointError, one line naming the file and the first problem; a path that is no regular
// file (a FIFO, say) is refused before it is opened.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::filesystem::path& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::vector<SafetensorsEntry>& tensors() const { return entries_; }  // in data order
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // Reads one tensor's values into `out` (entry.count() floats). Throws CheckpointError naming
  // the file and the tensor for a NaN or infinite value, or a read error.
  void read(const SafetensorsEntry& entry, std::span<float> out) const;

 private:
  std::filesystem::path path_;
  int fd_ = -1;
  std::uint64_t dataStart_ = 0;
  std::vector<SafetensorsEntry> entries_;
  std::map<std::string, std::string> metadata_;
};

// Every tensor of a file, read whole (SafetensorsFile's checks, tensor by tensor).
SafetensorsContent readSafetensors(const std::filesystem::path& path);
// The same from the file's bytes, `name` standing for the file in messages.
SafetensorsContent parseSafetensors(std::span<const std::uint8_t> bytes,
                                    const std::filesystem::path& name);

}  // namespace ringtrain::storage
