// BatchSource: what the training loop reads batches from, classification or regression alike.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "data/dataset.h"
#include "data/linear_regression_dataset.h"

namespace ringtrain {

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  virtual std::int64_t size() const = 0;
  virtual data::SampleShape sampleShape() const = 0;
  // Number of classes; 0 for regression (targets are values, one per sample).
  virtual int classes() const = 0;
  // Writes samples indices[0], indices[1], ... sample after sample into `inputs`, and their
  // targets into `labels` (classification) or `values` (regression).
  virtual void gather(std::span<const std::int64_t> indices, float* inputs, std::int32_t* labels,
                      float* values) const = 0;
  virtual std::string describe() const = 0;
  // Whether gather reads from a file (data::Dataset::readsStorage).
  virtual bool readsStorage() const { return false; }
};

// A classification dataset of data/ (MNIST, synthetic).
std::unique_ptr<BatchSource> classificationSource(std::unique_ptr<data::Dataset> dataset);
// Regression samples of one input value and one target value each.
std::unique_ptr<BatchSource> regressionSource(const data::LinearRegressionOptions& options);

}  // namespace ringtrain
