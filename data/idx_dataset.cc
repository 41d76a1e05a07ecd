#include "data/idx_dataset.h"

#include <stdexcept>
#include <string>
#include <system_error>

#include "base/file_checks.h"
#include "data/data_error.h"
#include "data/idx_reader.h"
#include "data/pixel_scale.h"

namespace ringtrain::data {

IdxDataset::IdxDataset(const std::filesystem::path& imagesPath,
                       const std::filesystem::path& labelsPath, int numClasses)
    : imagesPath_(imagesPath), numClasses_(numClasses) {
  if (numClasses < 1 || numClasses > 256) {
    throw std::invalid_argument("IdxDataset: numClasses must be in [1, 256] (labels are bytes)");
  }
  IdxImages images = readIdxImages(imagesPath);
  labels_ = readIdxLabels(labelsPath, numClasses);
  if (static_cast<std::int64_t>(labels_.size()) != images.count) {
    throw DataError(labelsPath.string() + ": holds " + std::to_string(labels_.size()) +
                    " labels but " + imagesPath.string() + " holds " +
                    std::to_string(images.count) + " images");
  }
  count_ = images.count;
  shape_ = SampleShape{1, images.rows, images.columns};
  pixels_ = std::move(images.pixels);
}

void IdxDataset::gather(std::span<const std::int64_t> indices, float* images,
                        std::int32_t* labels) const {
  const auto& unit = byteToUnit();
  const std::size_t elements = static_cast<std::size_t>(shape_.elements());
  for (std::size_t j = 0; j < indices.size(); ++j) {
    const std::int64_t i = indices[j];
    if (i < 0 || i >= count_) {
      throw std::out_of_range("IdxDataset::gather: index " + std::to_string(i) + " outside [0, " +
                              std::to_string(count_) + ")");
    }
    const std::uint8_t* source = pixels_.data() + static_cast<std::size_t>(i) * elements;
    float* target = images + j * elements;
    for (std::size_t k = 0; k < elements; ++k)
      target[k] = unit[source[k]];
    labels[j] = labels_[static_cast<std::size_t>(i)];
  }
}

std::string IdxDataset::describe() const {
  return "IDX " + imagesPath_.string() + ": " + std::to_string(count_) + " samples of " +
         toString(shape_) + ", " + std::to_string(numClasses_) + " classes";
}

std::filesystem::path findIdxFile(const std::filesystem::path& folder, const std::string& name) {
  if (auto problem = base::folderProblem(folder)) {
    throw DataError(folder.string() + ": " + *problem + " (data/fetch_mnist.sh " + folder.string() +
                    " fetches MNIST into it)");
  }
  std::error_code ec;
  for (const std::string& candidate : {name, name + ".gz"}) {
    const std::filesystem::path path = folder / candidate;
    if (std::filesystem::exists(path, ec)) return path;
  }
  throw DataError((folder / name).string() + ": not found, nor " + name +
                  ".gz (data/fetch_mnist.sh " + folder.string() + " fetches MNIST into it)");
}

DatasetPair loadMnist(const std::filesystem::path& folder) {
  DatasetPair pair;
  auto train = std::make_unique<IdxDataset>(findIdxFile(folder, "train-images-idx3-ubyte"),
                                            findIdxFile(folder, "train-labels-idx1-ubyte"));
  auto test = std::make_unique<IdxDataset>(findIdxFile(folder, "t10k-images-idx3-ubyte"),
                                           findIdxFile(folder, "t10k-labels-idx1-ubyte"));
  // A model is built for one input shape; a test set of another would fail far from the cause.
  if (test->sampleShape() != train->sampleShape()) {
    throw DataError(test->imagesPath().string() + ": images are " + toString(test->sampleShape()) +
                    " but " + train->imagesPath().string() + " has " +
                    toString(train->sampleShape()));
  }
  pair.train = std::move(train);
  pair.test = std::move(test);
  return pair;
}

}  // namespace ringtrain::data
