// BatchPrefetcher: a batch prefetched on the thread and one gathered on the spot hold the same
// bytes; the batch handed out is not touched while the next one is gathered; a prefetch for other
// indices is dropped; a background gather's error reaches the take() that wanted the batch, and
// only that one; without the thread, take() gathers and prefetch() does nothing.
#include "training/batch_prefetcher.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include "data/synthetic_dataset.h"

namespace ringtrain::training {
namespace {

using Indices = std::vector<std::int64_t>;

std::unique_ptr<BatchSource> synthetic() {
  data::SyntheticOptions options;
  options.size = 1000;
  options.shape = {1, 8, 8};
  return classificationSource(std::make_unique<data::SyntheticDataset>(options));
}

// The bytes the source gives for `indices`, gathered directly.
HostBatch direct(const BatchSource& source, const Indices& indices) {
  HostBatch b;
  b.inputs.resize(indices.size() * static_cast<std::size_t>(source.sampleShape().elements()));
  b.labels.resize(indices.size());
  b.values.resize(indices.size());
  source.gather(indices, b.inputs.data(), b.labels.data(), b.values.data());
  b.samples = indices.size();
  return b;
}

void expectSameBatch(const HostBatch& got, const HostBatch& want, const char* what) {
  ASSERT_EQ(got.samples, want.samples) << what;
  ASSERT_EQ(got.inputs.size(), want.inputs.size()) << what;
  EXPECT_EQ(std::memcmp(got.inputs.data(), want.inputs.data(), want.inputs.size() * 4), 0) << what;
  EXPECT_EQ(got.labels, want.labels) << what;
}

Indices batchAt(std::int64_t first, std::int64_t count) {
  Indices indices;
  for (std::int64_t i = 0; i < count; ++i)
    indices.push_back((first + i * 37) % 1000);
  return indices;
}

TEST(BatchPrefetcherTest, PrefetchedBatchesEqualBatchesGatheredOnTheSpot) {
  const auto source = synthetic();
  BatchPrefetcher prefetcher(*source, true);
  ASSERT_TRUE(prefetcher.background());
  expectSameBatch(prefetcher.take(batchAt(0, 16)), direct(*source, batchAt(0, 16)), "first");
  for (std::int64_t step = 1; step < 50; ++step) {
    prefetcher.prefetch(batchAt(step * 16, 16));
    const HostBatch& got = prefetcher.take(batchAt(step * 16, 16));
    expectSameBatch(got, direct(*source, batchAt(step * 16, 16)), "prefetched");
  }
  EXPECT_EQ(prefetcher.prefetchedTakes(), 49);
  EXPECT_EQ(prefetcher.directTakes(), 1);
}

TEST(BatchPrefetcherTest, TheBatchHandedOutIsUntouchedWhileTheNextIsGathered) {
  const auto source = synthetic();
  BatchPrefetcher prefetcher(*source, true);
  const HostBatch* previous = &prefetcher.take(batchAt(3, 32));
  for (std::int64_t step = 1; step < 20; ++step) {
    const HostBatch want = direct(*source, batchAt(3 + 32 * (step - 1), 32));
    prefetcher.prefetch(batchAt(3 + 32 * step, 32));
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // the gather has run by now
    expectSameBatch(*previous, want, "the batch in use");
    previous = &prefetcher.take(batchAt(3 + 32 * step, 32));
  }
}

TEST(BatchPrefetcherTest, APrefetchForOtherIndicesIsDroppedAndTheBatchGatheredNow) {
  const auto source = synthetic();
  BatchPrefetcher prefetcher(*source, true);
  prefetcher.take(batchAt(0, 8));
  prefetcher.prefetch(batchAt(100, 8));
  expectSameBatch(prefetcher.take(batchAt(200, 8)), direct(*source, batchAt(200, 8)), "other");
  // A smaller batch (an epoch's last) after a larger one.
  prefetcher.prefetch(batchAt(300, 3));
  expectSameBatch(prefetcher.take(batchAt(300, 3)), direct(*source, batchAt(300, 3)), "smaller");
  EXPECT_EQ(prefetcher.prefetchedTakes(), 1);
  EXPECT_EQ(prefetcher.directTakes(), 2);
}

// A source whose gather throws for index 666.
class FailingSource final : public BatchSource {
 public:
  explicit FailingSource(const BatchSource& inner) : inner_(inner) {}
  std::int64_t size() const override { return inner_.size(); }
  data::SampleShape sampleShape() const override { return inner_.sampleShape(); }
  int classes() const override { return inner_.classes(); }
  void gather(std::span<const std::int64_t> indices, float* inputs, std::int32_t* labels,
              float* values) const override {
    for (const std::int64_t i : indices) {
      if (i == 666) throw std::runtime_error("train.h5: sample 666 cannot be read");
    }
    inner_.gather(indices, inputs, labels, values);
  }
  std::string describe() const override { return "failing"; }

 private:
  const BatchSource& inner_;
};

TEST(BatchPrefetcherTest, ABackgroundErrorReachesTheTakeThatWantedTheBatchOnly) {
  const auto inner = synthetic();
  const FailingSource source(*inner);
  BatchPrefetcher prefetcher(source, true);
  prefetcher.take(batchAt(0, 4));
  prefetcher.prefetch(Indices{1, 666, 2});
  try {
    prefetcher.take(Indices{1, 666, 2});
    ADD_FAILURE() << "the read error was lost";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "train.h5: sample 666 cannot be read");
  }
  // A failed prefetch nobody takes does no harm.
  prefetcher.prefetch(Indices{666});
  expectSameBatch(prefetcher.take(batchAt(5, 4)), direct(*inner, batchAt(5, 4)), "after");
}

TEST(BatchPrefetcherTest, WithoutTheThreadTakeGathersAndPrefetchDoesNothing) {
  const auto inner = synthetic();
  const FailingSource source(*inner);
  BatchPrefetcher prefetcher(source, false);
  EXPECT_FALSE(prefetcher.background());
  prefetcher.prefetch(Indices{666});  // would throw if it gathered
  expectSameBatch(prefetcher.take(batchAt(9, 4)), direct(*inner, batchAt(9, 4)), "direct");
  EXPECT_EQ(prefetcher.prefetchedTakes(), 0);
  EXPECT_EQ(prefetcher.directTakes(), 1);
  EXPECT_THROW(prefetcher.take(Indices{666}), std::runtime_error);
}

}  // namespace
}  // namespace ringtrain::training
