// SyntheticDataset: a pure function of (seed, index), any shape and class count, values in
// [0, 1), and learnable: the nearest class mean of a few samples classifies new ones.
#include "data/synthetic_dataset.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "data/random.h"
#include "tests/data/data_test_support.h"

namespace ringtrain::data {
namespace {

struct Gathered {
  std::vector<float> images;
  std::vector<std::int32_t> labels;
};

Gathered gatherAll(const Dataset& dataset, const std::vector<std::int64_t>& indices) {
  Gathered g;
  g.images.assign(indices.size() * static_cast<std::size_t>(dataset.sampleShape().elements()),
                  -1.0f);
  g.labels.assign(indices.size(), -1);
  dataset.gather(indices, g.images.data(), g.labels.data());
  return g;
}

std::vector<std::int64_t> range(std::int64_t begin, std::int64_t end) {
  std::vector<std::int64_t> out(static_cast<std::size_t>(end - begin));
  std::iota(out.begin(), out.end(), begin);
  return out;
}

TEST(SyntheticDatasetTest, SameSeedSameSamplesOtherSeedOtherSamples) {
  const SyntheticOptions o{{1, 28, 28}, 10, 500, 7, 0};
  const Gathered a = gatherAll(SyntheticDataset(o), range(0, 500));
  const Gathered b = gatherAll(SyntheticDataset(o), range(0, 500));
  EXPECT_EQ(a.images, b.images);
  EXPECT_EQ(a.labels, b.labels);
  SyntheticOptions other = o;
  other.seed = 8;
  const Gathered c = gatherAll(SyntheticDataset(other), range(0, 500));
  EXPECT_NE(a.images, c.images);
  EXPECT_NE(a.labels, c.labels);
}

TEST(SyntheticDatasetTest, GatherOfAnySubsetInAnyOrderEqualsThoseSamples) {
  for (const SampleShape shape : {SampleShape{1, 28, 28}, SampleShape{3, 5, 7}, SampleShape{}}) {
    SCOPED_TRACE(toString(shape));
    const SyntheticDataset dataset(SyntheticOptions{shape, 13, 300, 99, 0});
    const Gathered all = gatherAll(dataset, range(0, 300));
    const auto elements = static_cast<std::size_t>(shape.elements());
    SplitMix64 rng(5);
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<std::int64_t> subset;
      const auto size = rng.below(40);
      for (std::uint64_t k = 0; k < size; ++k) {
        subset.push_back(static_cast<std::int64_t>(rng.below(300)));  // repeats allowed
      }
      const Gathered some = gatherAll(dataset, subset);
      for (std::size_t j = 0; j < subset.size(); ++j) {
        const auto i = static_cast<std::size_t>(subset[j]);
        EXPECT_EQ(some.labels[j], all.labels[i]);
        EXPECT_TRUE(std::equal(some.images.begin() + j * elements,
                               some.images.begin() + (j + 1) * elements,
                               all.images.begin() + i * elements));
        EXPECT_EQ(some.labels[j], dataset.label(subset[j]));
      }
    }
  }
}

TEST(SyntheticDatasetTest, ValuesInUnitIntervalAndEveryClassDrawnAboutEqually) {
  const SyntheticDataset dataset(SyntheticOptions{{2, 4, 4}, 10, 20000, 3, 0});
  const Gathered g = gatherAll(dataset, range(0, 20000));
  for (const float v : g.images)
    ASSERT_TRUE(v >= 0.0f && v < 1.0f) << v;
  std::vector<int> counts(10);
  for (const std::int32_t label : g.labels) {
    ASSERT_TRUE(label >= 0 && label < 10) << label;
    ++counts[static_cast<std::size_t>(label)];
  }
  for (const int count : counts)
    EXPECT_NEAR(count, 2000, 200);
}

TEST(SyntheticDatasetTest, FirstIndexShiftsTheWindowAndThePairSharesPrototypes) {
  const SyntheticOptions whole{{1, 6, 6}, 4, 150, 11, 0};
  const Gathered reference = gatherAll(SyntheticDataset(whole), range(0, 150));
  const DatasetPair pair = makeSyntheticPair(SyntheticOptions{{1, 6, 6}, 4, 100, 11, 0}, 50);
  ASSERT_EQ(pair.train->size(), 100);
  ASSERT_EQ(pair.test->size(), 50);
  const Gathered train = gatherAll(*pair.train, range(0, 100));
  const Gathered test = gatherAll(*pair.test, range(0, 50));
  EXPECT_TRUE(std::equal(train.images.begin(), train.images.end(), reference.images.begin()));
  EXPECT_TRUE(
      std::equal(test.images.begin(), test.images.end(), reference.images.begin() + 100 * 36));
  EXPECT_TRUE(std::equal(test.labels.begin(), test.labels.end(), reference.labels.begin() + 100));
}

// Nearest class mean, fitted on 1000 training samples, on 1000 test samples: far above the 10%
// of guessing, so a model has something to learn; the noise keeps single pixels from telling.
TEST(SyntheticDatasetTest, IsLearnableFromItsClassMeans) {
  const DatasetPair pair = makeSyntheticPair(SyntheticOptions{{1, 28, 28}, 10, 1000, 42, 0}, 1000);
  const std::size_t elements = 784;
  const Gathered train = gatherAll(*pair.train, range(0, 1000));
  std::vector<double> means(10 * elements, 0.0);
  std::vector<int> counts(10);
  for (std::size_t j = 0; j < 1000; ++j) {
    const auto c = static_cast<std::size_t>(train.labels[j]);
    ++counts[c];
    for (std::size_t k = 0; k < elements; ++k)
      means[c * elements + k] += train.images[j * elements + k];
  }
  for (std::size_t c = 0; c < 10; ++c) {
    for (std::size_t k = 0; k < elements; ++k)
      means[c * elements + k] /= std::max(counts[c], 1);
  }
  const Gathered test = gatherAll(*pair.test, range(0, 1000));
  int correct = 0;
  for (std::size_t j = 0; j < 1000; ++j) {
    std::size_t best = 0;
    double bestDistance = 1e300;
    for (std::size_t c = 0; c < 10; ++c) {
      double d = 0;
      for (std::size_t k = 0; k < elements; ++k) {
        const double diff = test.images[j * elements + k] - means[c * elements + k];
        d += diff * diff;
      }
      if (d < bestDistance) bestDistance = d, best = c;
    }
    correct += static_cast<int>(best) == test.labels[j];
  }
  EXPECT_GT(correct, 900);
}

TEST(SyntheticDatasetTest, BadOptionsAreOneLineErrors) {
  using testing::dataErrorOf;
  EXPECT_EQ(dataErrorOf([] {
              SyntheticDataset(SyntheticOptions{{0, 28, 28}, 10, 10, 1, 0});
            }),
            "synthetic data: shape 0x28x28 has a dimension below 1");
  EXPECT_EQ(dataErrorOf([] {
              SyntheticDataset(SyntheticOptions{{1, 28, 28}, 0, 10, 1, 0});
            }),
            "synthetic data: number of classes 0 is below 1");
  EXPECT_EQ(dataErrorOf([] {
              SyntheticDataset(SyntheticOptions{{1, 28, 28}, 10, 0, 1, 0});
            }),
            "synthetic data: size 0 is below 1");
  EXPECT_EQ(dataErrorOf([] {
              SyntheticDataset(SyntheticOptions{{1 << 20, 1 << 20, 1}, 10, 1, 1, 0});
            }),
            "synthetic data: shape 1048576x1048576x1 has more than 2^30 values per sample");
  const SyntheticDataset dataset(SyntheticOptions{{1, 2, 2}, 3, 5, 1, 0});
  std::vector<float> image(4);
  std::int32_t label = 0;
  EXPECT_THROW(dataset.gather(std::vector<std::int64_t>{5}, image.data(), &label),
               std::out_of_range);
}

}  // namespace
}  // namespace ringtrain::data
