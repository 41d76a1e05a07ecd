// IdxDataset and loadMnist: the batch contract (sample-major float32 in [0, 1], int32 labels),
// finding plain or .gz files, and one line naming the file for every way the pair can disagree.
#include "data/idx_dataset.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "data/idx_writer.h"
#include "tests/data/data_test_support.h"

namespace ringtrain::data {
namespace {

using testing::dataErrorOf;
using testing::TempFolder;

// Image i holds the bytes i*10 + k for pixel k, so a gathered sample shows which image it was.
std::vector<std::uint8_t> numberedImages(int count, int pixels) {
  std::vector<std::uint8_t> out;
  for (int i = 0; i < count; ++i) {
    for (int k = 0; k < pixels; ++k)
      out.push_back(static_cast<std::uint8_t>(i * 10 + k));
  }
  return out;
}

void writeMnist(const TempFolder& folder, int trainCount, int testCount, const std::string& gz) {
  writeIdxImages(folder / ("train-images-idx3-ubyte" + gz), trainCount, 2, 3,
                 numberedImages(trainCount, 6));
  writeIdxLabels(folder / ("train-labels-idx1-ubyte" + gz),
                 std::vector<std::uint8_t>(static_cast<std::size_t>(trainCount), 7));
  writeIdxImages(folder / ("t10k-images-idx3-ubyte" + gz), testCount, 2, 3,
                 numberedImages(testCount, 6));
  writeIdxLabels(folder / ("t10k-labels-idx1-ubyte" + gz),
                 std::vector<std::uint8_t>(static_cast<std::size_t>(testCount), 2));
}

TEST(IdxDatasetTest, GatherWritesSampleMajorFloatsScaledToUnitAndInt32Labels) {
  TempFolder folder;
  const std::vector<std::uint8_t> pixels = {0, 51, 255, 128, 1, 254,  // image 0
                                            9, 8,  7,   6,   5, 4};   // image 1
  writeIdxImages(folder / "images", 2, 2, 3, pixels);
  writeIdxLabels(folder / "labels", std::vector<std::uint8_t>{3, 9});
  const IdxDataset dataset(folder / "images", folder / "labels");
  EXPECT_EQ(dataset.size(), 2);
  EXPECT_EQ(dataset.sampleShape(), (SampleShape{1, 2, 3}));
  EXPECT_EQ(dataset.numClasses(), 10);

  const std::vector<std::int64_t> indices = {1, 0, 1};
  std::vector<float> images(3 * 6, -1.0f);
  std::vector<std::int32_t> labels(3, -1);
  dataset.gather(indices, images.data(), labels.data());
  EXPECT_EQ(labels, (std::vector<std::int32_t>{9, 3, 9}));
  for (std::size_t j = 0; j < indices.size(); ++j) {
    for (std::size_t k = 0; k < 6; ++k) {
      const std::uint8_t byte = pixels[static_cast<std::size_t>(indices[j]) * 6 + k];
      EXPECT_EQ(images[j * 6 + k], static_cast<float>(byte) / 255.0f) << j << "," << k;
    }
  }
  EXPECT_EQ(images[6 + 0], 0.0f);
  EXPECT_EQ(images[6 + 1], 0.2f);
  EXPECT_EQ(images[6 + 2], 1.0f);
  EXPECT_THROW(dataset.gather(std::vector<std::int64_t>{2}, images.data(), labels.data()),
               std::out_of_range);
  EXPECT_THROW(dataset.gather(std::vector<std::int64_t>{-1}, images.data(), labels.data()),
               std::out_of_range);
}

TEST(IdxDatasetTest, CountMismatchBetweenImagesAndLabelsNamesBothFiles) {
  TempFolder folder;
  writeIdxImages(folder / "images", 3, 2, 3, numberedImages(3, 6));
  writeIdxLabels(folder / "labels", std::vector<std::uint8_t>{1, 2});
  EXPECT_EQ(dataErrorOf([&] { IdxDataset(folder / "images", folder / "labels"); }),
            (folder / "labels").string() + ": holds 2 labels but " + (folder / "images").string() +
                " holds 3 images");
}

TEST(IdxDatasetTest, LabelsAreCheckedAgainstTheNumberOfClasses) {
  TempFolder folder;
  writeIdxImages(folder / "images", 2, 2, 3, numberedImages(2, 6));
  writeIdxLabels(folder / "labels", std::vector<std::uint8_t>{1, 4});
  EXPECT_EQ(IdxDataset(folder / "images", folder / "labels", 5).numClasses(), 5);
  EXPECT_EQ(dataErrorOf([&] { IdxDataset(folder / "images", folder / "labels", 4); }),
            (folder / "labels").string() +
                ": label 4 at index 1 is out of range: 4 classes take labels 0 to 3");
}

class LoadMnistFormatTest : public ::testing::TestWithParam<std::string> {};

TEST_P(LoadMnistFormatTest, LoadsTheTrainAndTestPair) {
  TempFolder folder;
  writeMnist(folder, 5, 3, GetParam());
  const DatasetPair pair = loadMnist(folder.path());
  EXPECT_EQ(pair.train->size(), 5);
  EXPECT_EQ(pair.test->size(), 3);
  EXPECT_EQ(pair.train->sampleShape(), (SampleShape{1, 2, 3}));
  std::vector<float> image(6);
  std::int32_t label = -1;
  pair.test->gather(std::vector<std::int64_t>{2}, image.data(), &label);
  EXPECT_EQ(label, 2);
  EXPECT_EQ(image[1], 21.0f / 255.0f);
  EXPECT_NE(pair.train->describe().find("5 samples of 1x2x3, 10 classes"), std::string::npos)
      << pair.train->describe();
}

INSTANTIATE_TEST_SUITE_P(PlainAndGzip, LoadMnistFormatTest, ::testing::Values("", ".gz"),
                         [](const auto& p) { return p.param.empty() ? "Plain" : "Gzip"; });

TEST(LoadMnistTest, PrefersThePlainFileWhenBothAreThere) {
  TempFolder folder;
  writeMnist(folder, 5, 3, "");
  writeIdxLabels(folder / "t10k-labels-idx1-ubyte.gz", std::vector<std::uint8_t>{1});  // stale
  EXPECT_EQ(loadMnist(folder.path()).test->size(), 3);
}

TEST(LoadMnistTest, MissingFolderOrFileIsNamed) {
  TempFolder folder;
  const auto missing = folder / "mnist";
  EXPECT_EQ(dataErrorOf([&] { loadMnist(missing); }),
            missing.string() + ": no such folder (data/fetch_mnist.sh " + missing.string() +
                " fetches MNIST into it)");
  writeMnist(folder, 5, 3, "");
  std::filesystem::remove(folder / "t10k-labels-idx1-ubyte");
  EXPECT_EQ(dataErrorOf([&] { loadMnist(folder.path()); }),
            (folder / "t10k-labels-idx1-ubyte").string() +
                ": not found, nor t10k-labels-idx1-ubyte.gz (data/fetch_mnist.sh " +
                folder.path().string() + " fetches MNIST into it)");
}

TEST(LoadMnistTest, TestImagesOfAnotherShapeAreRefused) {
  TempFolder folder;
  writeMnist(folder, 5, 3, "");
  writeIdxImages(folder / "t10k-images-idx3-ubyte", 3, 3, 2, numberedImages(3, 6));
  EXPECT_EQ(dataErrorOf([&] { loadMnist(folder.path()); }),
            (folder / "t10k-images-idx3-ubyte").string() + ": images are 1x3x2 but " +
                (folder / "train-images-idx3-ubyte").string() + " has 1x2x3");
}

}  // namespace
}  // namespace ringtrain::data
