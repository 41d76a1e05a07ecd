// The bucket plan: how a model's flat gradient buffer is cut into the ranges that are averaged
// as one unit.
//
// The model's gradients live in one flat buffer, layer after layer in forward order. Backward
// finishes them from the last layer to the first, so the buffer is cut into buckets of adjacent
// layers in reverse order, each at most the fusion threshold (a layer larger than that is a
// bucket of its own): a bucket is a contiguous range, averaged where it lies, without a copy
// into a fusion buffer.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

namespace ringtrain::engine {

// One layer's slice of the flat gradient buffer.
struct GradientSegment {
  std::string name;
  std::size_t offset = 0;  // elements
  std::size_t count = 0;
};

// A contiguous range of the gradient buffer, averaged as one unit. Segments
// [firstSegment, lastSegment] (forward order) make it up.
struct GradientBucket {
  int index = 0;  // 0 is the last layers', averaged first
  std::size_t offset = 0;
  std::size_t count = 0;
  int firstSegment = 0;
  int lastSegment = 0;
  std::string name;  // "bucket 0 (fc3.weight .. fc2.bias)"
};

// Buckets in reverse segment order, each at most thresholdBytes of float32. Throws
// std::invalid_argument when a segment is empty or does not follow the one before it.
std::vector<GradientBucket> planBuckets(std::span<const GradientSegment> segments,
                                        std::size_t thresholdBytes);
// One line per bucket: "bucket 0: 263178 float32 at 406528 (fc2.weight .. fc3.bias)".
std::string describePlan(std::span<const GradientBucket> buckets,
                         std::span<const GradientSegment> segments);

}  // namespace ringtrain::engine
