#include "data/idx_reader.h"

#include <cstdio>
#include <span>
#include <stdexcept>
#include <string>

#include "data/data_error.h"
#include "data/file_bytes.h"

namespace ringtrain::data {
namespace {

// What a file must hold: the magic number and dimensions, and how to name it in messages.
struct IdxKind {
  std::uint32_t magic;
  int dimensions;
  const char* noun;   // "images": "header says 60000 images of 28x28"
  const char* other;  // what a file with the other dimension count probably is
};
constexpr IdxKind kImages{kIdxImagesMagic, 3, "images", "a labels file?"};
constexpr IdxKind kLabels{kIdxLabelsMagic, 1, "labels", "an images file?"};

[[noreturn]] void fail(const std::filesystem::path& path, const std::string& what) {
  throw DataError(path.string() + ": " + what);
}

std::string hex(std::uint32_t value, int digits) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%0*x", digits, value);
  return text;
}

// "1000 bytes", or "1000 bytes uncompressed" for a .gz file, whose own size is something else.
std::string fileSize(const FileBytes& file) {
  return std::to_string(file.bytes.size()) + (file.gzipped ? " bytes uncompressed" : " bytes");
}

std::uint32_t bigEndian32(std::span<const std::uint8_t> bytes, std::size_t offset) {
  return std::uint32_t{bytes[offset]} << 24 | std::uint32_t{bytes[offset + 1]} << 16 |
         std::uint32_t{bytes[offset + 2]} << 8 | std::uint32_t{bytes[offset + 3]};
}

const char* typeName(std::uint8_t code) {
  switch (code) {
    case 0x08:
      return "unsigned byte";
    case 0x09:
      return "signed byte";
    case 0x0b:
      return "int16";
    case 0x0c:
      return "int32";
    case 0x0d:
      return "float32";
    case 0x0e:
      return "float64";
    default:
      return "not an IDX type";
  }
}

// Checks the magic number and that the whole header is there; returns the dimension sizes.
std::vector<std::uint64_t> readHeader(const std::filesystem::path& path, const FileBytes& file,
                                      const IdxKind& kind) {
  const std::span<const std::uint8_t> bytes = file.bytes;
  const std::size_t headerBytes = 4 + 4 * static_cast<std::size_t>(kind.dimensions);
  const std::string expected =
      "an IDX " + std::string(kind.noun) + " header has " + std::to_string(headerBytes) + " bytes";
  if (bytes.empty()) {
    fail(path, std::string(file.gzipped ? "empty once uncompressed" : "empty file") +
                   " (0 bytes); expected IDX " + kind.noun + " (magic number " +
                   hex(kind.magic, 8) + ")");
  }
  if (bytes.size() < 4) {
    fail(path, "truncated header: the file has " + fileSize(file) + " but " + expected);
  }
  if (bytes[0] == 0x1f && bytes[1] == 0x8b) {
    fail(path, "gzip-compressed data in a file whose name does not end in .gz");
  }
  const std::uint32_t magic = bigEndian32(bytes, 0);
  if (bytes[0] != 0 || bytes[1] != 0) {
    fail(path, "not an IDX file: magic number " + hex(magic, 8) + " (expected " +
                   hex(kind.magic, 8) + " for " + kind.noun + ")");
  }
  if (bytes[2] != 0x08) {
    fail(path, "unsupported IDX element type: magic number " + hex(magic, 8) + " has type code " +
                   hex(bytes[2], 2) + " (" + typeName(bytes[2]) +
                   "); only 0x08 (unsigned byte) is read");
  }
  if (bytes[3] != kind.dimensions) {
    fail(path, "wrong number of dimensions: magic number " + hex(magic, 8) + " says " +
                   std::to_string(bytes[3]) + " but IDX " + kind.noun + " have " +
                   std::to_string(kind.dimensions) + " (" + kind.other + ")");
  }
  if (bytes.size() < headerBytes) {
    fail(path, "truncated header: the file has " + fileSize(file) + " but " + expected);
  }
  std::vector<std::uint64_t> sizes;
  for (int d = 0; d < kind.dimensions; ++d) {
    sizes.push_back(bigEndian32(bytes, 4 + 4 * static_cast<std::size_t>(d)));
  }
  return sizes;
}

// "60000 images of 28x28" or "60000 labels".
std::string describeSizes(const IdxKind& kind, const std::vector<std::uint64_t>& sizes) {
  std::string text = std::to_string(sizes[0]) + " " + kind.noun;
  for (std::size_t d = 1; d < sizes.size(); ++d) {
    text += (d == 1 ? " of " : "x") + std::to_string(sizes[d]);
  }
  return text;
}

// Checks the sizes and that the file is exactly header + data long; returns the header length.
std::size_t checkLength(const std::filesystem::path& path, const FileBytes& file,
                        const IdxKind& kind, const std::vector<std::uint64_t>& sizes) {
  const std::string said = "header says " + describeSizes(kind, sizes);
  for (const std::uint64_t size : sizes) {
    if (size == 0) fail(path, said + "; every size must be positive");
  }
  const std::uint64_t headerBytes = 4 + 4 * sizes.size();
  // Each size is below 2^32 but their product need not fit in 64 bits.
  std::uint64_t total = headerBytes;
  std::uint64_t dataBytes = 1;
  bool overflow = false;
  for (const std::uint64_t size : sizes) {
    overflow |= __builtin_mul_overflow(dataBytes, size, &dataBytes);
  }
  overflow |= __builtin_add_overflow(total, dataBytes, &total);
  const std::string wanted = overflow ? "more than 2^64 bytes" : std::to_string(total) + " bytes";
  if (overflow || file.bytes.size() < total) {
    fail(path, "truncated: " + said + " (" + wanted + ") but the file has " + fileSize(file));
  }
  if (file.bytes.size() > total) {
    fail(path, "trailing bytes: " + said + " (" + wanted + ") but the file has " + fileSize(file));
  }
  return static_cast<std::size_t>(headerBytes);
}

}  // namespace

IdxImages readIdxImages(const std::filesystem::path& path) {
  FileBytes file = readFileBytes(path);
  const std::vector<std::uint64_t> sizes = readHeader(path, file, kImages);
  const std::size_t headerBytes = checkLength(path, file, kImages, sizes);
  IdxImages images;
  images.count = static_cast<std::int64_t>(sizes[0]);
  images.rows = static_cast<std::int64_t>(sizes[1]);
  images.columns = static_cast<std::int64_t>(sizes[2]);
  file.bytes.erase(file.bytes.begin(),
                   file.bytes.begin() + static_cast<std::ptrdiff_t>(headerBytes));
  images.pixels = std::move(file.bytes);
  return images;
}

std::vector<std::uint8_t> readIdxLabels(const std::filesystem::path& path, int numClasses) {
  if (numClasses < 1) {
    throw std::invalid_argument("readIdxLabels: numClasses " + std::to_string(numClasses) +
                                " is below 1");
  }
  FileBytes file = readFileBytes(path);
  const std::vector<std::uint64_t> sizes = readHeader(path, file, kLabels);
  const std::size_t headerBytes = checkLength(path, file, kLabels, sizes);
  file.bytes.erase(file.bytes.begin(),
                   file.bytes.begin() + static_cast<std::ptrdiff_t>(headerBytes));
  for (std::size_t i = 0; i < file.bytes.size(); ++i) {
    if (file.bytes[i] >= numClasses) {
      fail(path, "label " + std::to_string(file.bytes[i]) + " at index " + std::to_string(i) +
                     " is out of range: " + std::to_string(numClasses) +
                     " classes take labels 0 to " + std::to_string(numClasses - 1));
    }
  }
  return std::move(file.bytes);
}

}  // namespace ringtrain::data
