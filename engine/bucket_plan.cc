#include "engine/bucket_plan.h"

#include <stdexcept>

namespace ringtrain::engine {

std::vector<GradientBucket> planBuckets(std::span<const GradientSegment> segments,
                                        std::size_t thresholdBytes) {
  for (std::size_t i = 0; i < segments.size(); ++i) {
    if (segments[i].count == 0) {
      throw std::invalid_argument("gradient segment '" + segments[i].name + "' is empty");
    }
    if (i > 0 && segments[i].offset != segments[i - 1].offset + segments[i - 1].count) {
      throw std::invalid_argument("gradient segment '" + segments[i].name + "' does not follow '" +
                                  segments[i - 1].name +
                                  "' in the buffer: buckets must be contiguous ranges");
    }
  }
  std::vector<GradientBucket> buckets;
  int last = static_cast<int>(segments.size()) - 1;
  std::size_t bytes = 0;
  auto close = [&](int first) {
    GradientBucket b;
    b.index = static_cast<int>(buckets.size());
    b.firstSegment = first;
    b.lastSegment = last;
    b.offset = segments[static_cast<std::size_t>(first)].offset;
    const GradientSegment& end = segments[static_cast<std::size_t>(last)];
    b.count = end.offset + end.count - b.offset;
    b.name = "bucket " + std::to_string(b.index) + " (" +
             segments[static_cast<std::size_t>(first)].name +
             (first == last ? "" : " .. " + end.name) + ")";
    buckets.push_back(std::move(b));
  };
  for (int i = last; i >= 0; --i) {
    const std::size_t segmentBytes = segments[static_cast<std::size_t>(i)].count * sizeof(float);
    if (i < last && bytes + segmentBytes > thresholdBytes) {
      close(i + 1);
      last = i;
      bytes = 0;
    }
    bytes += segmentBytes;
  }
  if (!segments.empty()) close(0);
  return buckets;
}

std::string describePlan(std::span<const GradientBucket> buckets,
                         std::span<const GradientSegment> segments) {
  std::string text;
  for (const GradientBucket& b : buckets) {
    text += "bucket " + std::to_string(b.index) + ": " + std::to_string(b.count) + " float32 at " +
            std::to_string(b.offset) + " (" +
            segments[static_cast<std::size_t>(b.firstSegment)].name + " .. " +
            segments[static_cast<std::size_t>(b.lastSegment)].name + ")\n";
  }
  return text;
}

}  // namespace ringtrain::engine
