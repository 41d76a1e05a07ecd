#include "formats/crc32c.h"

#include <array>
#include <bit>
#include <cstring>

namespace ringtrain::formats {
namespace {

constexpr std::uint32_t kPolynomial = 0x82F63B78u;  // Castagnoli, bit-reversed

// Slicing-by-8 (Intel's method): table[k][b] is the CRC of byte b followed by k zero bytes, so
// eight bytes are folded in with eight look-ups instead of eight dependent shifts. A checkpoint of
// a few megabytes then takes milliseconds, not tens of them.
using Tables = std::array<std::array<std::uint32_t, 256>, 8>;

constexpr Tables makeTables() {
  Tables t{};
  for (std::uint32_t b = 0; b < 256; ++b) {
    std::uint32_t crc = b;
    for (int bit = 0; bit < 8; ++bit)
      crc = (crc >> 1) ^ ((crc & 1u) ? kPolynomial : 0u);
    t[0][b] = crc;
  }
  for (std::size_t k = 1; k < 8; ++k) {
    for (std::size_t b = 0; b < 256; ++b)
      t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xffu];
  }
  return t;
}

constexpr Tables kTables = makeTables();

// The eight-byte step reads words in the machine's order; the tables assume little-endian.
static_assert(std::endian::native == std::endian::little, "crc32c: little-endian machines only");

}  // namespace

std::uint32_t crc32c(std::span<const std::uint8_t> bytes, std::uint32_t crc) {
  std::uint32_t c = ~crc;
  const std::uint8_t* p = bytes.data();
  std::size_t n = bytes.size();
  while (n >= 8) {
    std::uint32_t low = 0;
    std::uint32_t high = 0;
    std::memcpy(&low, p, 4);
    std::memcpy(&high, p + 4, 4);
    low ^= c;
    c = kTables[7][low & 0xff] ^ kTables[6][(low >> 8) & 0xff] ^ kTables[5][(low >> 16) & 0xff] ^
        kTables[4][low >> 24] ^ kTables[3][high & 0xff] ^ kTables[2][(high >> 8) & 0xff] ^
        kTables[1][(high >> 16) & 0xff] ^ kTables[0][high >> 24];
    p += 8;
    n -= 8;
  }
  while (n-- > 0)
    c = (c >> 8) ^ kTables[0][(c ^ *p++) & 0xff];
  return ~c;
}

std::uint32_t crc32c(std::string_view bytes, std::uint32_t crc) {
  return crc32c(std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(bytes.data()),
                                              bytes.size()),
                crc);
}

}  // namespace ringtrain::formats
