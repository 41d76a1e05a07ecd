// BatchSource: what the training loop reads batches from, classification or regression alike.
#pragma once

#include <cstdint>
#include <memory>
#include <memory_resource>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "data/dataset.h"
#include "data/linear_regression_dataset.h"

namespace ringtrain::training {

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  virtual std::int64_t size() const = 0;
  virtual data::SampleShape sampleShape() const = 0;
  // Number of classes; 0 for regression (targets are values, one per sample).
  virtual int classes() const = 0;
  // Labels per sample (data::Dataset::labelsPerSample): a language model's context, else 1.
  virtual std::int64_t labelsPerSample() const { return 1; }
  // Writes samples indices[0], indices[1], ... sample after sample into `inputs`, and their
  // targets into `labels` (classification) or `values` (regression).
  virtual void gather(std::span<const std::int64_t> indices, float* inputs, std::int32_t* labels,
                      float* values) const = 0;
  virtual std::string describe() const = 0;
  // Whether gather reads from a file (data::Dataset::readsStorage).
  virtual bool readsStorage() const { return false; }
};

// A batch gathered on the host: samples × the source's sample size inputs, and labelsPerSample()
// labels (classification) or one target value (regression) per sample.
// Its buffers come from `memory` (page-locked memory for a GPU: GpuReplica::hostMemory()).
struct HostBatch {
  explicit HostBatch(std::pmr::memory_resource* memory = std::pmr::get_default_resource())
      : inputs(memory), labels(memory), values(memory) {}
  std::pmr::vector<float> inputs;
  std::pmr::vector<std::int32_t> labels;
  std::pmr::vector<float> values;
  std::size_t samples = 0;
};

// Gathers `indices` of `source` into `into`, growing its buffers as needed.
void gatherBatch(const BatchSource& source, std::span<const std::int64_t> indices, HostBatch& into);

// What the data determines, as (name, value) pairs for the start-up check that every rank reads
// the same data: size, sample shape, classes and a digest of a few samples at fixed indices
// (first, quartiles, last). Named "<what> samples", "<what> digest", ...; `what` is "train data"
// or "test data". The digest reads five samples: cheap, and it tells different files of the same
// size apart unless they differ only elsewhere.
std::vector<std::pair<std::string, std::string>> dataFacts(const BatchSource& source,
                                                           const std::string& what);

// A classification dataset of data/ (MNIST, synthetic).
std::unique_ptr<BatchSource> classificationSource(std::unique_ptr<data::Dataset> dataset);
// Regression samples of one input value and one target value each.
std::unique_ptr<BatchSource> regressionSource(const data::LinearRegressionOptions& options);

}  // namespace ringtrain::training
