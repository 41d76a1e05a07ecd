// One checkpoint file: the 512-byte header before the HDF5 part (checkpoint_hdf5.cc), the file
// encoded whole, and a file read, checked and parsed.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/file_checks.h"
#include "base/read_exactly.h"
#include "formats/crc32c.h"
#include "formats/format_error.h"
#include "formats/separate_check.h"
#include "storage/checkpoint.h"
#include "storage/checkpoint_format.h"

namespace ringtrain::storage {

[[noreturn]] void checkpoint_format::fail(const std::filesystem::path& file,
                                          const std::string& what) {
  throw CheckpointError(file.string() + ": " + what);
}

namespace {

namespace fs = std::filesystem;
using checkpoint_format::clipped;
using checkpoint_format::fail;
using checkpoint_format::kFormatVersion;
using checkpoint_format::kMaxKindBytes;
using checkpoint_format::splitLines;
using formats::crc32c;

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
constexpr std::size_t kHeaderBytes = 512;
constexpr std::size_t kHeaderCrcOffset = 44;
constexpr std::size_t kHeaderUsedBytes = 48;

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

}  // namespace

std::vector<std::uint8_t> encodeCheckpoint(const CheckpointContent& content) {
  if (content.step < 0 || content.epoch < 0 || content.sampler.epoch < 0 ||
      content.sampler.step < 0 || content.worldSize < 1 || content.batchSize < 0 ||
      content.optimizerSteps < 0 || content.optimizerKind.size() > kMaxKindBytes) {
    throw std::invalid_argument(
        "writeCheckpoint: negative counters, no ranks or an optimiser kind over 64 bytes");
  }
  const std::vector<std::uint8_t> image = checkpoint_format::encodeHdf5(content);
  std::vector<std::uint8_t> bytes = encodeHeader(image.size(), crc32c(image), content.step);
  bytes.insert(bytes.end(), image.begin(), image.end());
  return bytes;
}

CheckpointContent parseCheckpoint(std::span<const std::uint8_t> bytes, const fs::path& name,
                                  std::string_view expectedModelLayout) {
  const Header header =
      decodeHeader(bytes.first(std::min(bytes.size(), kHeaderBytes)), bytes.size(), name);
  const std::span<const std::uint8_t> image = checkedImage(bytes, header, name);
  CheckpointContent content;
  try {
    content = checkpoint_format::decodeHdf5(image, header.step, name);
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

}  // namespace ringtrain::storage
