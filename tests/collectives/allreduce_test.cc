// All-reduce on every backend, type and reduction, for the counts where ring algorithms go wrong
// (0, 1, fewer than the ranks, not divisible by them, a prime, several chunks) and, summing, for
// a count that runs the default ring's pipeline full (largeCount); in place and out of place. The
// results must be bitwise identical across ranks, and each element is checked against a float64
// reference computed from the same seeded inputs of all ranks: by every rank in RingCacheModeTest,
// by one rank (its share of the elements) in AllreduceTest, where identical results make that a
// check of every rank's every element at 1/ranks of the cost (the reference of the large count is
// most of this test's time).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <sstream>
#include <tuple>

#include "base/fingerprint.h"
#include "collectives/communicator.h"
#include "collectives/tuned_communicator.h"
#include "tests/collectives/collective_test_support.h"
#include "tests/support/mpi_test_environment.h"

namespace ringtrain::testing {
namespace {

using collectives::DataType;
using collectives::ReduceOp;

// Enough elements that each rank's segment of the narrowest type (2 bytes) travels in two chunks
// more than the default ring keeps in flight, and a remainder that the ranks do not divide.
std::size_t largeCount(int ranks) {
  const collectives::CommunicatorOptions defaults;
  const auto r = static_cast<std::size_t>(ranks);
  const auto chunks = static_cast<std::size_t>(defaults.ringPipelineDepth) + 2;
  return r * chunks * defaults.ringChunkBytes / 2 + r + 1;
}

std::vector<std::size_t> testCounts(int ranks, bool includeLarge) {
  std::vector<std::size_t> counts = {0, 1, 1009 /* prime */,
                                     12345 * static_cast<std::size_t>(ranks) + 1,
                                     100003 /* prime, several ring chunks */};
  if (ranks > 1) counts.push_back(static_cast<std::size_t>(ranks) - 1);  // fewer than the ranks
  if (ranks > 2) counts.push_back(static_cast<std::size_t>(ranks) + 1);  // not divisible
  if (includeLarge) counts.push_back(largeCount(ranks));
  return counts;
}

// Checks elements [begin, end) of `result` against the float64 reference of all ranks' inputs;
// returns the number of wrong elements and describes the first few.
std::size_t countWrong(DataType type, ReduceOp op, std::uint64_t seed, int ranks, std::size_t begin,
                       std::size_t end, const void* result, std::string& report) {
  std::vector<std::uint64_t> keys;
  for (int r = 0; r < ranks; ++r)
    keys.push_back(inputKey(seed, r));
  const double u = unitRoundoff(type);
  std::size_t wrong = 0;
  std::ostringstream out;
  for (std::size_t i = begin; i < end; ++i) {
    double expected = 0;
    double tolerance = 0;
    if (!isFloatingPoint(type)) {
      std::int64_t sum = 0, lo = INT64_MAX, hi = INT64_MIN;
      for (int r = 0; r < ranks; ++r) {
        const auto v = static_cast<std::int64_t>(inputValue(type, keys[r], i));
        sum += v;
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
      expected = static_cast<double>(op == ReduceOp::kSum       ? sum
                                     : op == ReduceOp::kAverage ? sum / ranks
                                     : op == ReduceOp::kMin     ? lo
                                                                : hi);
    } else {
      double sum = 0, absSum = 0, lo = INFINITY, hi = -INFINITY;
      for (int r = 0; r < ranks; ++r) {
        const double v = inputValue(type, keys[r], i);
        sum += v;
        absSum += std::fabs(v);
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
      switch (op) {
        case ReduceOp::kSum:
          expected = sum;
          tolerance = (ranks + 1) * u * absSum;
          break;
        case ReduceOp::kAverage:
          expected = sum / ranks;
          tolerance = (ranks + 1) * u * absSum / ranks;
          break;
        case ReduceOp::kMin:
          expected = lo;
          break;  // min and max are exact
        case ReduceOp::kMax:
          expected = hi;
          break;
      }
    }
    const double got = elementAt(type, result, i);
    if (!(std::fabs(got - expected) <= tolerance)) {
      if (++wrong <= 5) {
        out << "  element " << i << ": got " << got << ", expected " << expected << " +- "
            << tolerance << "\n";
      }
    }
  }
  report = out.str();
  return wrong;
}

using Param = std::tuple<BackendConfig, DataType, ReduceOp>;

class AllreduceTest : public ::testing::TestWithParam<Param> {};

TEST_P(AllreduceTest, MatchesFloat64ReferenceAndIsBitwiseIdenticalOnEveryRank) {
  const auto& [config, type, op] = GetParam();
  auto comm = makeCommunicator(config);
  const int ranks = comm->size();
  const std::size_t elementSize = sizeOf(type);
  // The large count checks ringtrain's chunking of a large buffer, which depends on the element
  // size, not on the reduction: it runs with sum for every type, on the ring and hierarchical
  // defaults (the 4 KiB-chunk configurations already pass many chunks through their pipeline on
  // the small counts; mpi does no chunking of ours), on more than one rank.
  const bool includeLarge = ranks > 1 && config.backend != collectives::Backend::kMpi &&
                            !config.label.ends_with("_pipelined") && op == ReduceOp::kSum;
  std::uint64_t seed = 1000 * static_cast<std::uint64_t>(type) + static_cast<std::uint64_t>(op);

  for (const std::size_t count : testCounts(ranks, includeLarge)) {
    for (const bool inPlace : {false, true}) {
      SCOPED_TRACE(::testing::Message()
                   << "count " << count << (inPlace ? ", in place" : ", out of place"));
      ++seed;
      auto& send = scratchBuffer(0);
      auto& recv = scratchBuffer(1);
      send.resize(std::max<std::size_t>(count * elementSize, 1));
      recv.resize(std::max<std::size_t>(count * elementSize, 1));
      fillInput(type, seed, comm->rank(), count, send.data());
      // Poison the output so that elements the backend never writes cannot pass by accident.
      std::memset(recv.data(), 0x7f, count * elementSize);

      void* result = inPlace ? send.data() : recv.data();
      comm->allreduce(send.data(), result, count, type, op);

      // This rank's share of the elements; the fingerprints below make every rank's the same.
      const auto rank = static_cast<std::size_t>(comm->rank());
      const auto share = [&](std::size_t r) { return count * r / static_cast<std::size_t>(ranks); };
      std::string report;
      const std::size_t wrong =
          countWrong(type, op, seed, ranks, share(rank), share(rank + 1), result, report);
      EXPECT_EQ(wrong, 0u) << "wrong elements on rank " << comm->rank() << ":\n" << report;
      const auto differing = ranksDifferingFromRankZero(fingerprint(result, count * elementSize));
      EXPECT_TRUE(differing.empty())
          << "result differs from rank 0's on rank " << differing.front();
      if (!inPlace) {
        // The input must be left alone.
        auto& expectedInput = scratchBuffer(2);
        expectedInput.resize(std::max<std::size_t>(count * elementSize, 1));
        fillInput(type, seed, comm->rank(), count, expectedInput.data());
        EXPECT_EQ(std::memcmp(expectedInput.data(), send.data(), count * elementSize), 0)
            << "out-of-place all-reduce modified its input";
      }
    }
  }
}

std::string paramName(const ::testing::TestParamInfo<Param>& info) {
  const auto& [config, type, op] = info.param;
  return config.label + "_" + std::string(name(type)) + "_" + std::string(name(op));
}

INSTANTIATE_TEST_SUITE_P(Backends, AllreduceTest,
                         ::testing::Combine(::testing::ValuesIn(backendConfigs()),
                                            ::testing::ValuesIn(collectives::kAllDataTypes),
                                            ::testing::ValuesIn(collectives::kAllReduceOps)),
                         paramName);

// The ring writes its results in one of two ways, tuning-table algorithms `ring` and
// `ring-cached` (RingWrites, ring_allreduce.h); both must give the reference's bits, in place and
// out of place, call after call on the same buffers as a training loop makes them (in place, each
// call then overwrites lines the neighbour read in the last one, and receives where sends were
// pending). Counts: below and above RingAllreduce::kCachedStoreBytes, in several 64 KiB chunks.
class RingCacheModeTest : public ::testing::TestWithParam<collectives::AllreduceAlgorithm> {};

std::string algorithmName(const ::testing::TestParamInfo<collectives::AllreduceAlgorithm>& info) {
  std::string label(name(info.param));
  std::replace(label.begin(), label.end(), '-', '_');
  return label;
}

TEST_P(RingCacheModeTest, EveryWayOfWritingGivesTheReferenceBitsCallAfterCall) {
  collectives::CommunicatorOptions options;
  options.ringChunkBytes = 64 * 1024;
  const auto layout = collectives::rankLayoutOf(MPI_COMM_WORLD, 0);
  auto comm = std::make_unique<collectives::TunedCommunicator>(
      MPI_COMM_WORLD, options, collectives::singleAlgorithmTable(layout, GetParam()));
  const std::size_t counts[] = {1009, 100003, 300007};
  std::uint64_t seed = 77;
  for (const std::size_t count : counts) {
    for (const bool inPlace : {false, true}) {
      for (const ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
        auto& send = scratchBuffer(0);
        auto& recv = scratchBuffer(1);
        send.resize(count * 4);
        recv.resize(count * 4);
        for (int call = 0; call < 3; ++call) {
          SCOPED_TRACE(::testing::Message() << "count " << count << (inPlace ? ", in place" : "")
                                            << ", " << name(op) << ", call " << call);
          ++seed;
          fillInput(DataType::kFloat32, seed, comm->rank(), count, send.data());
          void* result = inPlace ? send.data() : recv.data();
          comm->allreduce(send.data(), result, count, DataType::kFloat32, op);
          std::string report;
          EXPECT_EQ(
              countWrong(DataType::kFloat32, op, seed, comm->size(), 0, count, result, report), 0u)
              << "wrong elements on rank " << comm->rank() << ":\n"
              << report;
          const auto differing = ranksDifferingFromRankZero(fingerprint(result, count * 4));
          EXPECT_TRUE(differing.empty())
              << "result differs from rank 0's on rank " << differing.front();
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ring, RingCacheModeTest,
                         ::testing::Values(collectives::AllreduceAlgorithm::kRing,
                                           collectives::AllreduceAlgorithm::kRingCached),
                         algorithmName);

}  // namespace
}  // namespace ringtrain::testing
