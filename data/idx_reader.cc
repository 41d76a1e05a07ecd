#include "data/idx_reader.h"

#include <cstdio>
#include <span>
#include <stdexcept>
#include <string>

#include "data/data_error.h"
#include "formats/file_bytes.h"

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
std::string contentSize(const formats::FileContent& file, std::uint64_t bytes) {
  return std::to_string(bytes) + (file.gzipped() ? " bytes uncompressed" : " bytes");
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

// Reads the header, checks the magic number and that the whole header is there; returns the
// dimension sizes.
std::vector<std::uint64_t> readHeader(const std::filesystem::path& path, formats::FileContent& file,
                                      const IdxKind& kind) {
  const std::size_t headerBytes = 4 + 4 * static_cast<std::size_t>(kind.dimensions);
  const std::span<const std::uint8_t> bytes = file.readUpTo(headerBytes);
  const std::string expected =
      "an IDX " + std::string(kind.noun) + " header has " + std::to_string(headerBytes) + " bytes";
  if (bytes.empty()) {
    fail(path, std::string(file.gzipped() ? "empty once uncompressed" : "empty file") +
                   " (0 bytes); expected IDX " + kind.noun + " (magic number " +
                   hex(kind.magic, 8) + ")");
  }
  if (bytes.size() < 4) {
    fail(path,
         "truncated header: the file has " + contentSize(file, bytes.size()) + " but " + expected);
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
    fail(path,
         "truncated header: the file has " + contentSize(file, bytes.size()) + " but " + expected);
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

// Checks the sizes, refuses a length the file cannot hold before reading the data, then reads
// one byte more than the header announces: the content must be exactly header + data long.
// Returns the whole content.
std::vector<std::uint8_t> readData(const std::filesystem::path& path, formats::FileContent& file,
                                   const IdxKind& kind, const std::vector<std::uint64_t>& sizes) {
  const std::string said = "header says " + describeSizes(kind, sizes);
  for (const std::uint64_t size : sizes) {
    if (size == 0) fail(path, said + "; every size must be positive");
  }
  // Each size is below 2^32 but their product need not fit in 64 bits.
  std::uint64_t total = 4 + 4 * sizes.size();
  std::uint64_t dataBytes = 1;
  bool overflow = false;
  for (const std::uint64_t size : sizes) {
    overflow |= __builtin_mul_overflow(dataBytes, size, &dataBytes);
  }
  overflow |= __builtin_add_overflow(total, dataBytes, &total);
  const std::string wanted =
      said + " (" + (overflow ? "more than 2^64 bytes" : std::to_string(total) + " bytes") + ")";
  if (overflow || total > file.maxContentBytes()) {
    if (file.gzipped()) {
      fail(path, wanted + " but a gzip file of " + std::to_string(file.fileBytes()) +
                     " bytes can hold at most " + std::to_string(file.maxContentBytes()) +
                     " bytes (deflate expands at most " +
                     std::to_string(formats::kMaxDeflateExpansion) + " times)");
    }
    fail(path, "truncated: " + wanted + " but the file has " + contentSize(file, file.fileBytes()));
  }
  const std::span<const std::uint8_t> content = file.readUpTo(total + 1);
  if (content.size() < total) {
    fail(path, "truncated: " + wanted + " but the file has " + contentSize(file, content.size()));
  }
  if (content.size() > total) {
    // A .gz file is inflated no further than this: its whole length is not known.
    fail(path, "trailing bytes: " + wanted + " but the file has " +
                   (file.gzipped() ? "more than " + contentSize(file, total)
                                   : contentSize(file, file.fileBytes())));
  }
  return file.take();
}

// The content after the header.
std::vector<std::uint8_t> withoutHeader(std::vector<std::uint8_t> content, const IdxKind& kind) {
  content.erase(content.begin(), content.begin() + 4 + 4 * kind.dimensions);
  return content;
}

}  // namespace

IdxImages readIdxImages(const std::filesystem::path& path) {
  formats::FileContent file(path);
  const std::vector<std::uint64_t> sizes = readHeader(path, file, kImages);
  IdxImages images;
  images.pixels = withoutHeader(readData(path, file, kImages, sizes), kImages);
  images.count = static_cast<std::int64_t>(sizes[0]);
  images.rows = static_cast<std::int64_t>(sizes[1]);
  images.columns = static_cast<std::int64_t>(sizes[2]);
  return images;
}

std::vector<std::uint8_t> readIdxLabels(const std::filesystem::path& path, int numClasses) {
  if (numClasses < 1) {
    throw std::invalid_argument("readIdxLabels: numClasses " + std::to_string(numClasses) +
                                " is below 1");
  }
  formats::FileContent file(path);
  const std::vector<std::uint64_t> sizes = readHeader(path, file, kLabels);
  std::vector<std::uint8_t> labels = withoutHeader(readData(path, file, kLabels, sizes), kLabels);
  for (std::size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] >= numClasses) {
      fail(path, "label " + std::to_string(labels[i]) + " at index " + std::to_string(i) +
                     " is out of range: " + std::to_string(numClasses) +
                     " classes take labels 0 to " + std::to_string(numClasses - 1));
    }
  }
  return labels;
}

}  // namespace ringtrain::data
