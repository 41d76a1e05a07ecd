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

#include "src/storage/checkpoint.h"

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

// Reads and checks a file as the specification asks (header length within the file, a JSON
// object, every tensor's offsets in range, sized by its shape, the tensors covering the data
// without gap or overlap). Throws CheckpointError, one line naming `path` and the first problem,
// for a file that breaks it, and for a tensor of another dtype than F32.
SafetensorsContent readSafetensors(const std::filesystem::path& path);
// The same from the file's bytes, `name` standing for the file in messages.
SafetensorsContent parseSafetensors(std::span<const std::uint8_t> bytes,
                                    const std::filesystem::path& name);

}  // namespace ringtrain::storage
