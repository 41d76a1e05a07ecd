// planBuckets: reverse layer order, capped by the threshold, contiguous, whole layers.
#include "engine/bucket_plan.h"

#include <gtest/gtest.h>

#include <vector>

namespace ringtrain::engine {
namespace {

std::vector<GradientSegment> layers(const std::vector<std::size_t>& counts) {
  std::vector<GradientSegment> segments;
  std::size_t offset = 0;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    segments.push_back({"layer" + std::to_string(i), offset, counts[i]});
    offset += counts[i];
  }
  return segments;
}

TEST(BucketPlanTest, BucketsFollowBackwardFromTheLastLayerAndCoverEverythingOnce) {
  const auto segments = layers({100, 200, 300, 50, 50});  // floats; threshold in bytes below
  const auto buckets = planBuckets(segments, 350 * 4);
  // From the last layer: {layer3, layer4} = 100 (adding layer2 would make 400), {layer2} = 300,
  // {layer0, layer1} = 300.
  ASSERT_EQ(buckets.size(), 3u);
  EXPECT_EQ(buckets[0].firstSegment, 3);
  EXPECT_EQ(buckets[0].lastSegment, 4);
  EXPECT_EQ(buckets[1].firstSegment, 2);
  EXPECT_EQ(buckets[1].lastSegment, 2);
  EXPECT_EQ(buckets[2].firstSegment, 0);
  EXPECT_EQ(buckets[2].lastSegment, 1);
  std::size_t covered = 0;
  for (std::size_t b = 0; b < buckets.size(); ++b) {
    EXPECT_EQ(buckets[b].index, static_cast<int>(b));
    EXPECT_LE(buckets[b].count * 4, 350u * 4) << buckets[b].name;
    covered += buckets[b].count;
    if (b > 0) {
      EXPECT_EQ(buckets[b].offset + buckets[b].count, buckets[b - 1].offset);
    }
  }
  EXPECT_EQ(covered, 700u);
  EXPECT_EQ(buckets.back().offset, 0u);
}

TEST(BucketPlanTest, ALayerLargerThanTheThresholdIsABucketOfItsOwn) {
  const auto buckets = planBuckets(layers({10, 1000, 10}), 64);
  ASSERT_EQ(buckets.size(), 3u);
  EXPECT_EQ(buckets[1].count, 1000u);
  EXPECT_EQ(buckets[1].name, "bucket 1 (layer1)");
}

TEST(BucketPlanTest, AHugeThresholdGivesOneBucketAndATinyOneABucketPerLayer) {
  EXPECT_EQ(planBuckets(layers({3, 4, 5}), 1 << 30).size(), 1u);
  EXPECT_EQ(planBuckets(layers({3, 4, 5}), 1).size(), 3u);
}

TEST(BucketPlanTest, SegmentsWithGapsOrNothingInThemAreRefused) {
  auto gap = layers({3, 4});
  gap[1].offset += 1;
  EXPECT_THROW(planBuckets(gap, 1024), std::invalid_argument);
  EXPECT_THROW(planBuckets(layers({3, 0}), 1024), std::invalid_argument);
}

}  // namespace
}  // namespace ringtrain::engine
