#include "training/batch_source.h"

#include <fmt/format.h>

#include "base/fingerprint.h"

namespace ringtrain::training {
namespace {

class ClassificationSource final : public BatchSource {
 public:
  explicit ClassificationSource(std::unique_ptr<data::Dataset> dataset)
      : dataset_(std::move(dataset)) {}
  std::int64_t size() const override { return dataset_->size(); }
  data::SampleShape sampleShape() const override { return dataset_->sampleShape(); }
  int classes() const override { return dataset_->numClasses(); }
  std::int64_t labelsPerSample() const override { return dataset_->labelsPerSample(); }
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
  into.labels.resize(indices.size() * static_cast<std::size_t>(source.labelsPerSample()));
  into.values.resize(indices.size());
  into.samples = 0;
  source.gather(indices, into.inputs.data(), into.labels.data(), into.values.data());
  into.samples = indices.size();
}

namespace {

// A hash of the inputs and targets of the samples at fixed fractions of the source.
std::string sampleDigest(const BatchSource& source) {
  const std::int64_t last = source.size() - 1;
  const std::vector<std::int64_t> indices = {0, last / 4, last / 2, last - last / 4, last};
  HostBatch batch;
  gatherBatch(source, indices, batch);
  const auto bytes = [](const auto& values) {
    return fingerprint(values.data(), values.size() * sizeof(values[0]));
  };
  const std::uint64_t parts[] = {bytes(batch.inputs), bytes(batch.labels), bytes(batch.values)};
  return fmt::format("{:016x}", fingerprint(parts, sizeof(parts)));
}

}  // namespace

std::vector<std::pair<std::string, std::string>> dataFacts(const BatchSource& source,
                                                           const std::string& what) {
  const data::SampleShape shape = source.sampleShape();
  std::vector<std::pair<std::string, std::string>> facts = {
      {what + " samples", std::to_string(source.size())},
      {what + " sample shape", fmt::format("{}x{}x{}", shape.channels, shape.height, shape.width)},
      {what + " classes", std::to_string(source.classes())},
  };
  if (source.size() > 0) facts.emplace_back(what + " digest", sampleDigest(source));
  return facts;
}

std::unique_ptr<BatchSource> regressionSource(const data::LinearRegressionOptions& options) {
  return std::make_unique<RegressionSource>(options);
}

std::unique_ptr<BatchSource> classificationSource(std::unique_ptr<data::Dataset> dataset) {
  return std::make_unique<ClassificationSource>(std::move(dataset));
}

}  // namespace ringtrain::training
