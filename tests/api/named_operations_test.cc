// ringtrain.h's named operations under mpirun, every rank checking its own results: operations
// submitted in different orders on different ranks are matched by name, every kind moves what
// Horovod's does, the engine lacks nothing for the 8-bit types and the product, ranks that
// disagree get one Error on every rank, a name twice in flight is InvalidArgument at once, and
// process sets run on their own ranks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "ringtrain/ringtrain.h"

namespace {

using ringtrain::DataType;
using ringtrain::Operation;
using ringtrain::OperationKind;
using ringtrain::ReduceOp;

class NamedOperations : public ::testing::Test {
 protected:
  void SetUp() override {
    ringtrain::Options options;
    options.readEnvironment = false;
    options.stallTimeoutSeconds = 60;
    ringtrain::start(options);
    rank_ = ringtrain::rank();
    size_ = ringtrain::size();
  }
  void TearDown() override { ringtrain::shutdown(); }

  Operation allreduceOf(std::vector<float>& data, const std::string& name) const {
    Operation op;
    op.name = name;
    op.shape = {static_cast<std::int64_t>(data.size())};
    op.input = op.output = data.data();
    op.op = ReduceOp::kSum;
    return op;
  }

  int rank_ = 0;
  int size_ = 1;
};

TEST_F(NamedOperations, OppositeOrdersAreMatchedByName) {
  std::vector<float> first(100, 1.0f + static_cast<float>(rank_));
  std::vector<float> second(100, 1000.0f + static_cast<float>(rank_));
  Operation a = allreduceOf(first, "first");
  Operation b = allreduceOf(second, "second");
  std::int64_t ha = 0, hb = 0;
  if (rank_ % 2 == 0) {
    ha = ringtrain::submit(a), hb = ringtrain::submit(b);
  } else {
    hb = ringtrain::submit(b), ha = ringtrain::submit(a);
  }
  ringtrain::wait(hb);
  ringtrain::wait(ha);
  float firstSum = 0, secondSum = 0;
  for (int r = 0; r < size_; ++r)
    firstSum += 1.0f + static_cast<float>(r), secondSum += 1000.0f + static_cast<float>(r);
  EXPECT_TRUE(std::all_of(first.begin(), first.end(), [&](float v) { return v == firstSum; }));
  EXPECT_TRUE(std::all_of(second.begin(), second.end(), [&](float v) { return v == secondSum; }));
}

TEST_F(NamedOperations, AllgatherOfUnevenRowsAndAlltoallWithSplits) {
  std::vector<std::int8_t> mine(static_cast<std::size_t>(rank_ + 1) * 2,
                                static_cast<std::int8_t>(rank_));
  Operation gather;
  gather.kind = OperationKind::kAllgather;
  gather.name = "gather";
  gather.type = DataType::kInt8;
  gather.shape = {rank_ + 1, 2};
  gather.input = mine.data();
  const ringtrain::OperationResult gathered = ringtrain::wait(ringtrain::submit(gather));
  ASSERT_EQ(gathered.shape, (std::vector<std::int64_t>{size_ * (size_ + 1) / 2, 2}));
  std::size_t at = 0;
  for (int r = 0; r < size_; ++r)
    for (int k = 0; k < (r + 1) * 2; ++k)
      EXPECT_EQ(static_cast<int>(gathered.data[at++]), r);

  // Rank r sends k + 1 rows of value 10r + k to rank k.
  std::vector<std::int32_t> rows;
  std::vector<std::int64_t> splits;
  for (int k = 0; k < size_; ++k) {
    splits.push_back(k + 1);
    rows.insert(rows.end(), static_cast<std::size_t>(k + 1), 10 * rank_ + k);
  }
  Operation exchange;
  exchange.kind = OperationKind::kAlltoall;
  exchange.name = "exchange";
  exchange.type = DataType::kInt32;
  exchange.shape = {static_cast<std::int64_t>(rows.size())};
  exchange.input = rows.data();
  exchange.splits = splits;
  const ringtrain::OperationResult received = ringtrain::wait(ringtrain::submit(exchange));
  ASSERT_EQ(received.receivedSplits,
            std::vector<std::int64_t>(static_cast<std::size_t>(size_), rank_ + 1));
  std::vector<std::int32_t> values(received.data.size() / sizeof(std::int32_t));
  std::memcpy(values.data(), received.data.data(), received.data.size());
  for (std::size_t i = 0; i < values.size(); ++i)
    EXPECT_EQ(values[i], 10 * static_cast<int>(i / static_cast<std::size_t>(rank_ + 1)) + rank_);
}

// A result of 3 MiB a rank: ResultAllocator's large path (unzeroed memory on 2 MiB boundaries,
// huge pages where the OS lends them) holds what every rank sent.
TEST_F(NamedOperations, LargeAllgatherResult) {
  const std::size_t count = (std::size_t{3} << 20) / sizeof(float) + 5;
  std::vector<float> mine(count);
  for (std::size_t i = 0; i < count; ++i)
    mine[i] = static_cast<float>(rank_) + 1e-6f * i;
  Operation gather;
  gather.kind = OperationKind::kAllgather;
  gather.name = "large";
  gather.shape = {static_cast<std::int64_t>(count)};
  gather.input = mine.data();
  const ringtrain::OperationResult gathered = ringtrain::wait(ringtrain::submit(gather));
  ASSERT_EQ(gathered.data.size(), count * sizeof(float) * static_cast<std::size_t>(size_));
  std::vector<float> all(count * static_cast<std::size_t>(size_));
  std::memcpy(all.data(), gathered.data.data(), gathered.data.size());
  for (int r = 0; r < size_; ++r)
    for (std::size_t i = 0; i < count; i += 997)
      ASSERT_EQ(all[static_cast<std::size_t>(r) * count + i], static_cast<float>(r) + 1e-6f * i);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(gathered.data.data()) % (std::size_t{2} << 20), 0u);
}

TEST_F(NamedOperations, ProductOfUint8AndReducescatter) {
  std::vector<std::uint8_t> two(4, 2);
  Operation product;
  product.name = "product";
  product.type = DataType::kUInt8;
  product.op = ReduceOp::kProduct;
  product.shape = {4};
  product.input = product.output = two.data();
  ringtrain::wait(ringtrain::submit(product));
  EXPECT_EQ(two[0], static_cast<std::uint8_t>(1u << size_));

  const int rows = 2 * size_ + 1;
  std::vector<double> all(static_cast<std::size_t>(rows));
  std::iota(all.begin(), all.end(), 0.0);
  Operation scatter;
  scatter.kind = OperationKind::kReducescatter;
  scatter.name = "scatter";
  scatter.type = DataType::kFloat64;
  scatter.op = ReduceOp::kSum;
  scatter.shape = {rows};
  scatter.input = all.data();
  const ringtrain::OperationResult part = ringtrain::wait(ringtrain::submit(scatter));
  const int base = rows / size_, extra = rows % size_;
  const int first = rank_ * base + std::min(rank_, extra);
  ASSERT_EQ(part.shape[0], base + (rank_ < extra ? 1 : 0));
  std::vector<double> mine(static_cast<std::size_t>(part.shape[0]));
  std::memcpy(mine.data(), part.data.data(), part.data.size());
  for (std::size_t i = 0; i < mine.size(); ++i)
    EXPECT_EQ(mine[i], static_cast<double>((first + static_cast<int>(i)) * size_));
}

TEST_F(NamedOperations, DisagreementIsOneErrorOnEveryRank) {
  std::vector<float> data(static_cast<std::size_t>(3 + rank_), 1.0f);
  Operation op = allreduceOf(data, "uneven");
  const std::int64_t handle = ringtrain::submit(op);
  if (size_ == 1) {
    EXPECT_NO_THROW(ringtrain::wait(handle));
    return;
  }
  try {
    ringtrain::wait(handle);
    ADD_FAILURE() << "no Error";
  } catch (const ringtrain::Error& e) {
    EXPECT_NE(std::string(e.what()).find("where rank"), std::string::npos) << e.what();
  }
}

TEST_F(NamedOperations, NameTwiceInFlightIsInvalidArgument) {
  if (size_ == 1) GTEST_SKIP() << "one rank completes an operation at once";
  // Rank r's own name stays in flight until the others submit it, after the barrier.
  std::vector<std::vector<float>> data(static_cast<std::size_t>(size_), std::vector<float>(4, 1));
  std::vector<float> again(4, 1.0f);
  const std::string mine = "twice." + std::to_string(rank_);
  std::vector<std::int64_t> handles{ringtrain::submit(allreduceOf(data[0], mine))};
  EXPECT_THROW(ringtrain::submit(allreduceOf(again, mine)), ringtrain::InvalidArgument);
  ringtrain::barrier();
  for (int r = 0; r < size_; ++r) {
    if (r != rank_) {
      handles.push_back(ringtrain::submit(
          allreduceOf(data[static_cast<std::size_t>(r)], "twice." + std::to_string(r))));
    }
  }
  for (std::int64_t handle : handles)
    ringtrain::wait(handle);
  EXPECT_THROW(ringtrain::poll(handles[0]), ringtrain::InvalidArgument);  // spent
}

TEST_F(NamedOperations, ProcessSetsRunOnTheirRanks) {
  std::vector<int> evens, odds;
  for (int r = 0; r < size_; ++r)
    (r % 2 ? odds : evens).push_back(r);
  const int evenSet = ringtrain::addProcessSet(evens);
  const int oddSet = odds.empty() ? -1 : ringtrain::addProcessSet(odds);
  const std::vector<int>& mine = rank_ % 2 ? odds : evens;
  std::vector<float> data(8, static_cast<float>(rank_));
  Operation op = allreduceOf(data, "in-set");
  op.processSet = rank_ % 2 ? oddSet : evenSet;
  ringtrain::wait(ringtrain::submit(op));
  EXPECT_EQ(data[0], static_cast<float>(std::accumulate(mine.begin(), mine.end(), 0)));
  EXPECT_EQ(ringtrain::processSetRanks(op.processSet), mine);
  ringtrain::removeProcessSet(evenSet);
  if (oddSet >= 0) ringtrain::removeProcessSet(oddSet);
  EXPECT_EQ(ringtrain::processSetIds(), std::vector<int>{0});
}

// A device operation that cannot run is refused at submit, on its rank, naming the operation: in
// a build without the GPU path, any; in a GPU build, int16 (NCCL lacks it) and a buffer that is
// not device memory (host memory here, whatever GPUs the machine has). The host path goes on.
TEST_F(NamedOperations, DeviceOperationsThatCannotRunAreRefusedAtSubmit) {
#ifdef RINGTRAIN_HAVE_NCCL
  EXPECT_GT(ringtrain::ncclVersion(), 20000);
  const std::string hostMemory = "is not CUDA device memory", int16 = "NCCL has no 16-bit";
#else
  EXPECT_EQ(ringtrain::ncclVersion(), 0);
  const std::string hostMemory = "this build of ringtrain has no GPU path", int16 = hostMemory;
#endif
  const auto refusal = [](const Operation& op) -> std::string {
    try {
      ringtrain::wait(ringtrain::submit(op));
    } catch (const ringtrain::InvalidArgument& e) {
      return e.what();
    }
    return "accepted";
  };
  std::vector<float> data(4, 1.0f);
  Operation op = allreduceOf(data, "on.device");
  op.device = 0;
  const std::string text = refusal(op);
  EXPECT_NE(text.find(hostMemory), std::string::npos) << text;
  EXPECT_NE(text.find("allreduce 'on.device'"), std::string::npos) << text;
  op.type = DataType::kInt16;
  EXPECT_NE(refusal(op).find(int16), std::string::npos) << refusal(op);
  op.type = DataType::kFloat32;
  op.device = -1;
  ringtrain::wait(ringtrain::submit(op));
  EXPECT_EQ(data, std::vector<float>(4, static_cast<float>(size_)));  // the sum of ones
}

}  // namespace
