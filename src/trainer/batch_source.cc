#include "src/trainer/batch_source.h"

namespace ringtrain {
namespace {

class ClassificationSource final : public BatchSource {
 public:
  explicit ClassificationSource(std::unique_ptr<data::Dataset> dataset)
      : dataset_(std::move(dataset)) {}
  std::int64_t size() const override { return dataset_->size(); }
  data::SampleShape sampleShape() const override { return dataset_->sampleShape(); }
  int classes() const override { return dataset_->numClasses(); }
  void gather(std::span<const std::int64_t> indices, float* inputs, std::int32_t* labels,
              float*) const override {
    dataset_->gather(indices, inputs, labels);
  }
  std::string describe() const override { return dataset_->describe(); }
  bool readsStorage() const override { return dataset_->readsStorage(); }

 private:
  std::unique_ptr<data::Dataset> dataset_;
};

class RegressionSource final : public BatchSource {
 public:
  explicit RegressionSource(const data::LinearRegressionOptions& options) : dataset_(options) {}
  std::int64_t size() const override { return dataset_.size(); }
  data::SampleShape sampleShape() const override { return {1, 1, 1}; }
  int classes() const override { return 0; }
  void gather(std::span<const std::int64_t> indices, float* inputs, std::int32_t*,
              float* values) const override {
    dataset_.gather(indices, inputs, values);
  }
  std::string describe() const override { return dataset_.describe(); }

 private:
  data::LinearRegressionDataset dataset_;
};

}  // namespace

void gatherBatch(const BatchSource& source, std::span<const std::int64_t> indices,
                 HostBatch& into) {
  const auto sampleSize = static_cast<std::size_t>(source.sampleShape().elements());
  into.inputs.resize(indices.size() * sampleSize);
  into.labels.resize(indices.size());
  into.values.resize(indices.size());
  into.samples = 0;
  source.gather(indices, into.inputs.data(), into.labels.data(), into.values.data());
  into.samples = indices.size();
}

std::unique_ptr<BatchSource> regressionSource(const data::LinearRegressionOptions& options) {
  return std::make_unique<RegressionSource>(options);
}

std::unique_ptr<BatchSource> classificationSource(std::unique_ptr<data::Dataset> dataset) {
  return std::make_unique<ClassificationSource>(std::move(dataset));
}

}  // namespace ringtrain
