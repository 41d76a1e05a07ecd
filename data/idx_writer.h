// Writer of IDX files (see idx_reader.h): used by the JSON-to-IDX converter and by the tests.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

namespace ringtrain::data {

// The bytes of an IDX images file: magic 0x00000803, count, rows, columns, then the pixels
// (count x rows x columns of them; anything else is std::invalid_argument).
std::vector<std::uint8_t> encodeIdxImages(std::int64_t count, std::int64_t rows,
                                          std::int64_t columns,
                                          std::span<const std::uint8_t> pixels);

// The bytes of an IDX labels file: magic 0x00000801, count, then the labels.
std::vector<std::uint8_t> encodeIdxLabels(std::span<const std::uint8_t> labels);

// Encode and write atomically (gzip-compressed when the name ends in .gz); see
// writeFileAtomically.
void writeIdxImages(const std::filesystem::path& path, std::int64_t count, std::int64_t rows,
                    std::int64_t columns, std::span<const std::uint8_t> pixels);
void writeIdxLabels(const std::filesystem::path& path, std::span<const std::uint8_t> labels);

}  // namespace ringtrain::data
