// IdxDataset: an IDX images file and its labels file, held in memory as bytes.
#pragma once

#include <filesystem>
#include <vector>

#include "data/dataset.h"

namespace ringtrain::data {

inline constexpr int kMnistClasses = 10;

class IdxDataset final : public Dataset {
 public:
  // Reads both files (see readIdxImages) and checks that they hold the same number of samples and
  // that every label is below numClasses; throws DataError naming the file at fault.
  IdxDataset(const std::filesystem::path& imagesPath, const std::filesystem::path& labelsPath,
             int numClasses = kMnistClasses);

  std::int64_t size() const override { return count_; }
  SampleShape sampleShape() const override { return shape_; }
  int numClasses() const override { return numClasses_; }
  void gather(std::span<const std::int64_t> indices, float* images,
              std::int32_t* labels) const override;
  std::string describe() const override;

  const std::filesystem::path& imagesPath() const { return imagesPath_; }

 private:
  std::filesystem::path imagesPath_;
  std::int64_t count_ = 0;
  SampleShape shape_;
  int numClasses_ = 0;
  // Kept as the file's bytes (a quarter of the floats' size) and scaled in gather: the whole of
  // MNIST's training set is 47 MB this way.
  std::vector<std::uint8_t> pixels_;
  std::vector<std::uint8_t> labels_;
};

// Finds `name` or `name.gz` in `folder` (the plain file first: it needs no inflating). Throws
// DataError naming the folder when it does not exist, or the file when neither name is there.
std::filesystem::path findIdxFile(const std::filesystem::path& folder, const std::string& name);

// The MNIST train/test pair in `folder`: train-images-idx3-ubyte, train-labels-idx1-ubyte,
// t10k-images-idx3-ubyte and t10k-labels-idx1-ubyte, each plain or .gz (what
// data/fetch_mnist.sh leaves there). Test images must have the training images' shape.
DatasetPair loadMnist(const std::filesystem::path& folder);

}  // namespace ringtrain::data
