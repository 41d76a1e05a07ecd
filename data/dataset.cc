#include "data/dataset.h"

#include <algorithm>
#include <exception>
#include <numeric>
#include <vector>

#include "data/data_error.h"

namespace ringtrain::data {

std::string toString(const SampleShape& shape) {
  return std::to_string(shape.channels) + "x" + std::to_string(shape.height) + "x" +
         std::to_string(shape.width);
}

void readSamples(const Dataset& dataset, const std::vector<std::int64_t>& indices) {
  const auto elements = static_cast<std::size_t>(dataset.sampleShape().elements());
  std::vector<float> images(indices.size() * elements);
  std::vector<std::int32_t> labels(indices.size() *
                                   static_cast<std::size_t>(dataset.labelsPerSample()));
  dataset.gather(indices, images.data(), labels.data());
}

void readEverySample(const Dataset& dataset, std::int64_t batchSamples) {
  const std::int64_t count = dataset.size();
  std::vector<std::int64_t> indices;
  for (std::int64_t first = 0; first < count; first += batchSamples) {
    indices.resize(static_cast<std::size_t>(std::min(batchSamples, count - first)));
    std::iota(indices.begin(), indices.end(), first);
    try {
      readSamples(dataset, indices);
    } catch (const std::exception& e) {
      throw DataError("samples " + std::to_string(first) + " to " +
                      std::to_string(first + static_cast<std::int64_t>(indices.size()) - 1) +
                      " of " + std::to_string(count) + ": " + e.what());
    }
  }
}

}  // namespace ringtrain::data
