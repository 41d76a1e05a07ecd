// Shared pieces of the data tests: those of every test of files (tests/formats/
// format_test_support.h: a temporary folder, raw file writes, a check of error messages) and a
// gather into fresh buffers.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data/data_error.h"
#include "data/dataset.h"
#include "tests/formats/format_test_support.h"

namespace ringtrain::data::testing {

using formats::testing::readRaw;
using formats::testing::TempFolder;
using formats::testing::writeRaw;

// The message of the DataError, or of the FormatError of a file format under data/, `action`
// throws ("" and a test failure when it throws none).
inline std::string dataErrorOf(const std::function<void()>& action) {
  return formats::testing::errorOf(action);
}

// What Dataset::gather writes for `indices`: the samples and their labels.
struct Gathered {
  std::vector<float> images;
  std::vector<std::int32_t> labels;
};

inline Gathered gatherAll(const Dataset& dataset, const std::vector<std::int64_t>& indices) {
  Gathered g;
  g.images.resize(indices.size() * static_cast<std::size_t>(dataset.sampleShape().elements()));
  g.labels.resize(indices.size() * static_cast<std::size_t>(dataset.labelsPerSample()));
  dataset.gather(indices, g.images.data(), g.labels.data());
  return g;
}

}  // namespace ringtrain::data::testing
