#include "data/idx_writer.h"

#include <stdexcept>
#include <string>

#include "data/idx_reader.h"
#include "formats/file_bytes.h"

namespace ringtrain::data {
namespace {

void appendBigEndian32(std::vector<std::uint8_t>& out, std::int64_t value) {
  if (value < 0 || value > 0xffffffffLL) {
    throw std::invalid_argument("IDX size " + std::to_string(value) + " does not fit in 32 bits");
  }
  const auto v = static_cast<std::uint32_t>(value);
  for (int shift = 24; shift >= 0; shift -= 8)
    out.push_back(static_cast<std::uint8_t>(v >> shift));
}

}  // namespace

std::vector<std::uint8_t> encodeIdxImages(std::int64_t count, std::int64_t rows,
                                          std::int64_t columns,
                                          std::span<const std::uint8_t> pixels) {
  std::int64_t expected = 0;
  const bool overflow = __builtin_mul_overflow(count, rows, &expected) ||
                        __builtin_mul_overflow(expected, columns, &expected);
  if (count < 0 || rows < 0 || columns < 0 || overflow ||
      static_cast<std::uint64_t>(expected) != pixels.size()) {
    throw std::invalid_argument("encodeIdxImages: " + std::to_string(pixels.size()) +
                                " pixels are not " + std::to_string(count) + " images of " +
                                std::to_string(rows) + "x" + std::to_string(columns));
  }
  std::vector<std::uint8_t> out;
  out.reserve(16 + pixels.size());
  appendBigEndian32(out, kIdxImagesMagic);
  appendBigEndian32(out, count);
  appendBigEndian32(out, rows);
  appendBigEndian32(out, columns);
  out.insert(out.end(), pixels.begin(), pixels.end());
  return out;
}

std::vector<std::uint8_t> encodeIdxLabels(std::span<const std::uint8_t> labels) {
  std::vector<std::uint8_t> out;
  out.reserve(8 + labels.size());
  appendBigEndian32(out, kIdxLabelsMagic);
  appendBigEndian32(out, static_cast<std::int64_t>(labels.size()));
  out.insert(out.end(), labels.begin(), labels.end());
  return out;
}

void writeIdxImages(const std::filesystem::path& path, std::int64_t count, std::int64_t rows,
                    std::int64_t columns, std::span<const std::uint8_t> pixels) {
  formats::writeFileAtomically(path, encodeIdxImages(count, rows, columns, pixels));
}

void writeIdxLabels(const std::filesystem::path& path, std::span<const std::uint8_t> labels) {
  formats::writeFileAtomically(path, encodeIdxLabels(labels));
}

}  // namespace ringtrain::data
