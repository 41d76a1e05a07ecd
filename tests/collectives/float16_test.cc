// float16 and bfloat16 conversions: exact round trips, round-to-nearest-even, overflow,
// subnormals and NaN, and the F16C path agreeing with the portable one bit for bit.
#include "collectives/float16.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace ringtrain::collectives {
namespace {

TEST(Float16Test, EveryFloat16SurvivesARoundTripThroughFloat32) {
  for (std::uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const Float16 h{static_cast<std::uint16_t>(bits)};
    const float f = toFloat(h);
    const bool isNan = (bits & 0x7c00) == 0x7c00 && (bits & 0x3ff) != 0;
    if (isNan) {
      EXPECT_TRUE(std::isnan(f)) << std::hex << bits;
      EXPECT_TRUE(std::isnan(toFloat(toFloat16(f))));
    } else {
      EXPECT_EQ(toFloat16(f).bits, bits) << std::hex << bits;
      EXPECT_EQ(portable::floatToFloat16(portable::float16ToFloat(h.bits)), bits)
          << std::hex << bits;
    }
  }
}

TEST(Float16Test, KnownValues) {
  EXPECT_EQ(toFloat16(1.0f).bits, 0x3c00);
  EXPECT_EQ(toFloat16(-2.0f).bits, 0xc000);
  EXPECT_EQ(toFloat16(65504.0f).bits, 0x7bff);             // largest finite
  EXPECT_EQ(toFloat16(65519.0f).bits, 0x7bff);             // below the halfway point
  EXPECT_EQ(toFloat16(65520.0f).bits, 0x7c00);             // halfway rounds to infinity
  EXPECT_EQ(toFloat16(0x1p-24f).bits, 0x0001);             // smallest subnormal
  EXPECT_EQ(toFloat16(0x1p-25f).bits, 0x0000);             // halfway to it: ties to even (0)
  EXPECT_EQ(toFloat16(0x1.8p-25f).bits, 0x0001);           // above halfway
  EXPECT_EQ(toFloat16(1.0f + 0x1p-11f).bits, 0x3c00);      // tie, even is 1.0
  EXPECT_EQ(toFloat16(1.0f + 3 * 0x1p-11f).bits, 0x3c02);  // tie, even is up
  EXPECT_EQ(toFloat16(-0.0f).bits, 0x8000);
  EXPECT_EQ(toFloat16(INFINITY).bits, 0x7c00);
  EXPECT_FLOAT_EQ(toFloat(Float16{0x3555}), 0.333251953125f);
}

// With F16C available (the usual build) toFloat16 is the hardware instruction: the portable code
// must give the same bits for every non-NaN float we can throw at it.
TEST(Float16Test, PortableConversionMatchesTheDefaultOneOnRandomAndEdgeFloats) {
  std::mt19937 rng(42);
  std::vector<std::uint32_t> patterns;
  for (int i = 0; i < 2'000'000; ++i)
    patterns.push_back(rng());
  // Every float16 value and its neighbours in float32, where rounding decisions flip.
  for (std::uint32_t h = 0; h < 0x7c00; ++h) {
    const std::uint32_t f =
        std::bit_cast<std::uint32_t>(portable::float16ToFloat(static_cast<std::uint16_t>(h)));
    for (std::uint32_t delta : {0u, 1u, 0xfffu, 0x1000u, 0x1001u}) {
      patterns.push_back(f + delta);
      patterns.push_back((f - delta) | 0x80000000u);
    }
  }
  for (const std::uint32_t bits : patterns) {
    const float f = std::bit_cast<float>(bits);
    if (std::isnan(f)) continue;
    ASSERT_EQ(portable::floatToFloat16(f), toFloat16(f).bits) << std::hexfloat << f;
  }
}

TEST(Float16Test, ArrayConversionsMatchTheScalarOnes) {
  std::vector<float> in;
  for (int i = -1000; i < 1000; ++i)
    in.push_back(static_cast<float>(i) * 0.37f);
  std::vector<Float16> half(in.size());
  std::vector<BFloat16> brain(in.size());
  convertFromFloat(in.data(), half.data(), in.size());
  convertFromFloat(in.data(), brain.data(), in.size());
  std::vector<float> back(in.size());
  convertToFloat(half.data(), back.data(), in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(half[i].bits, toFloat16(in[i]).bits);
    EXPECT_EQ(back[i], toFloat(half[i]));
    EXPECT_EQ(brain[i].bits, toBFloat16(in[i]).bits);
  }
}

TEST(BFloat16Test, RoundsToNearestEvenAndKeepsNaN) {
  EXPECT_EQ(toBFloat16(1.0f).bits, 0x3f80);
  EXPECT_EQ(toBFloat16(1.0f + 0x1p-8f).bits, 0x3f80);      // tie, even is down
  EXPECT_EQ(toBFloat16(1.0f + 3 * 0x1p-8f).bits, 0x3f82);  // tie, even is up
  EXPECT_EQ(toBFloat16(1.0f + 0x1.1p-8f).bits, 0x3f81);    // above the tie
  EXPECT_TRUE(std::isnan(toFloat(toBFloat16(NAN))));
  EXPECT_EQ(toBFloat16(INFINITY).bits, 0x7f80);
  EXPECT_EQ(toBFloat16(3.4e38f).bits, 0x7f80);  // rounds up past the largest finite value
  for (std::uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const BFloat16 b{static_cast<std::uint16_t>(bits)};
    if (std::isnan(toFloat(b))) continue;
    EXPECT_EQ(toBFloat16(toFloat(b)).bits, bits);
  }
}

}  // namespace
}  // namespace ringtrain::collectives
