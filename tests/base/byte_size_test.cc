// One reading of sizes in bytes for every program: what --fusion-threshold, allreduce_perf's -b/-e
// and the library's RINGTRAIN_FUSION_THRESHOLD take.
#include "base/byte_size.h"

#include <gtest/gtest.h>

namespace ringtrain {
namespace {

TEST(ByteSize, PlainBytesAndBinaryUnitsWithOrWithoutB) {
  const std::pair<const char*, std::size_t> cases[] = {{"8", 8},           {"65536", 65536},
                                                       {"64K", 64 << 10},  {"64k", 64 << 10},
                                                       {"64KB", 64 << 10}, {"64KiB", 64 << 10},
                                                       {"8M", 8 << 20},    {"8MB", 8 << 20},
                                                       {"8MiB", 8 << 20},  {"256MB", 256u << 20},
                                                       {"1G", 1u << 30},   {"1.5M", 3u << 19},
                                                       {"0", 0},           {"12B", 12}};
  for (const auto& [text, bytes] : cases) {
    const auto parsed = parseByteSize(text);
    ASSERT_TRUE(parsed) << text;
    EXPECT_EQ(*parsed, bytes) << text;
  }
}

TEST(ByteSize, AnythingElseIsRefused) {
  for (const char* text : {"", "M", "-1", "64X", "64iB", "64 K", "1e3", "64KK", "9999999999G"})
    EXPECT_FALSE(parseByteSize(text)) << text;
}

TEST(ByteSize, TheShortTextReadsBack) {
  for (const std::size_t bytes : {std::size_t{1000}, std::size_t{64} << 10, std::size_t{8} << 20,
                                  std::size_t{3} << 30, std::size_t{1536}}) {
    EXPECT_EQ(parseByteSize(byteSizeText(bytes)), bytes) << byteSizeText(bytes);
  }
  EXPECT_EQ(byteSizeText(std::size_t{8} << 20), "8M");
  EXPECT_EQ(byteSizeText(1000), "1000");
}

}  // namespace
}  // namespace ringtrain
