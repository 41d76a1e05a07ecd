// CRC-32C (Castagnoli): the checksum of TFRecord files and of ringtrain's checkpoints.
//
// Why this one and not zlib's crc32: TFRecord, which TensorBoard reads, is defined with CRC-32C,
// and one checksum for both formats means one implementation to trust. Reflected polynomial
// 0x82F63B78, initial value and final XOR 0xFFFFFFFF; crc32c("123456789") == 0xE3069283.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace ringtrain::formats {

// The CRC-32C of `bytes`, continuing from `crc` (the CRC of what came before; 0 to start), so
// crc32c(b, crc32c(a)) == crc32c(a + b).
std::uint32_t crc32c(std::span<const std::uint8_t> bytes, std::uint32_t crc = 0);
std::uint32_t crc32c(std::string_view bytes, std::uint32_t crc = 0);

// TFRecord's masked CRC: rotated right by 15 bits plus a constant, because a CRC computed over
// data that itself contains CRCs is weak (TensorFlow's crc32c::Mask).
constexpr std::uint32_t maskCrc32c(std::uint32_t crc) {
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

}  // namespace ringtrain::formats
