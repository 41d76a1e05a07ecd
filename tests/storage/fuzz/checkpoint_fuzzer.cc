// libFuzzer target: the checkpoint reader (storage/checkpoint.h) on arbitrary bytes, twice:
// as they are -- where the header and its CRC-32C stop nearly everything -- and with the header
// rewritten to be valid for them (length and CRC of what follows), so that mutations reach the
// HDF5 part and the reader's checks of its contents, as a deliberately forged file would. Any
// answer but a FormatError (CheckpointError is one) is a finding, and so is an HDF5 object left
// open afterwards.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "formats/crc32c.h"
#include "formats/format_error.h"
#include "storage/checkpoint.h"
#include "tests/storage/fuzz/fuzz_target.h"
#include "tests/storage/fuzz/hdf5_open_objects.h"

namespace {

constexpr std::size_t kHeaderBytes = 512;

void put(std::vector<std::uint8_t>& bytes, std::size_t at, std::uint64_t value, int count) {
  for (int i = 0; i < count; ++i)
    bytes[at + static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(value >> (8 * i));
}

// The documented header (checkpoint_file.cc) made valid for whatever follows it; the step the input
// holds is kept, made non-negative.
std::vector<std::uint8_t> sealed(std::span<const std::uint8_t> input) {
  std::vector<std::uint8_t> bytes(input.begin(), input.end());
  std::fill(bytes.begin(), bytes.begin() + kHeaderBytes, 0);
  std::memcpy(bytes.data(), "ringtrain-ckpt", 14);
  put(bytes, 16, 2, 4);
  put(bytes, 20, kHeaderBytes, 4);
  put(bytes, 24, bytes.size() - kHeaderBytes, 8);
  const auto image = std::span<const std::uint8_t>(bytes).subspan(kHeaderBytes);
  put(bytes, 32, ringtrain::formats::crc32c(image), 4);
  std::uint64_t step = 0;
  for (int i = 0; i < 8; ++i)
    step |= std::uint64_t{input[36 + static_cast<std::size_t>(i)]} << (8 * i);
  put(bytes, 36, step & 0x7fffffffffffffffULL, 8);
  put(bytes, 44, ringtrain::formats::crc32c(std::span<const std::uint8_t>(bytes).first(44)), 4);
  return bytes;
}

void parse(std::span<const std::uint8_t> bytes) {
  try {
    ringtrain::storage::parseCheckpoint(bytes, "fuzz-input.h5", "model layout\n");
  } catch (const ringtrain::formats::FormatError&) {
  }
  abortIfHdf5ObjectsOpen("parseCheckpoint");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::uint8_t> input(data, size);
  parse(input);
  if (size > kHeaderBytes) parse(sealed(input));
  return 0;
}
