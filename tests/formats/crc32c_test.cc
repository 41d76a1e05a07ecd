// CRC-32C: the published check values, and agreement with a bit-at-a-time reference on every
// length and alignment the eight-byte loop could get wrong.
#include "formats/crc32c.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "tests/formats/format_test_support.h"

namespace ringtrain::formats {
namespace {

TEST(Crc32cTest, MatchesTheCheckValues) {
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);  // the catalogue's check value
  // RFC 3720 (iSCSI), appendix B.4.
  EXPECT_EQ(crc32c(std::vector<std::uint8_t>(32, 0x00)), 0x8A9136AAu);
  EXPECT_EQ(crc32c(std::vector<std::uint8_t>(32, 0xff)), 0x62A8AB43u);
  std::vector<std::uint8_t> ascending(32);
  for (std::size_t i = 0; i < 32; ++i)
    ascending[i] = static_cast<std::uint8_t>(i);
  EXPECT_EQ(crc32c(ascending), 0x46DD794Eu);
  EXPECT_EQ(crc32c(""), 0u);
}

TEST(Crc32cTest, AgreesWithTheBitwiseReferenceAtEveryLengthAndOffset) {
  std::vector<std::uint8_t> bytes(300);
  std::uint32_t x = 12345;
  for (auto& b : bytes) {
    x = x * 1103515245u + 12345u;
    b = static_cast<std::uint8_t>(x >> 24);
  }
  for (std::size_t offset = 0; offset < 8; ++offset) {
    for (std::size_t length = 0; length + offset <= bytes.size(); length += 7) {
      const std::span<const std::uint8_t> part(bytes.data() + offset, length);
      ASSERT_EQ(crc32c(part), testing::referenceCrc32c(part))
          << "offset " << offset << " length " << length;
    }
  }
}

TEST(Crc32cTest, ContinuesAcrossPieces) {
  const std::string text = "The quick brown fox jumps over the lazy dog";
  for (std::size_t cut = 0; cut <= text.size(); ++cut) {
    EXPECT_EQ(crc32c(std::string_view(text).substr(cut), crc32c(text.substr(0, cut))),
              crc32c(text));
  }
}

TEST(Crc32cTest, MaskIsTensorFlows) {
  // crc32c::Mask of TensorFlow's lib/hash/crc32c.h: rotate right by 15, add 0xa282ead8.
  EXPECT_EQ(maskCrc32c(0), 0xa282ead8u);
  EXPECT_EQ(maskCrc32c(0xE3069283u), ((0xE3069283u >> 15) | (0xE3069283u << 17)) + 0xa282ead8u);
}

}  // namespace
}  // namespace ringtrain::formats
