#include "tests/collectives/collective_test_support.h"

#include <cmath>
#include <cstring>

#include <mpi.h>

#include "collectives/float16.h"
#include "collectives/mpi_check.h"

namespace ringtrain::testing {

using collectives::Backend;
using collectives::DataType;

std::vector<BackendConfig> backendConfigs() {
  std::vector<BackendConfig> configs;
  configs.push_back({"mpi", Backend::kMpi, {}});
  configs.push_back({"ring", Backend::kRing, {}});
  collectives::CommunicatorOptions pipelined;
  pipelined.ringSmallMessageBytes = 0;
  pipelined.ringChunkBytes = 4096;
  pipelined.ringPipelineDepth = 2;
  configs.push_back({"ring_pipelined", Backend::kRing, pipelined});
  // Every 2 consecutive ranks form a "node": 4 ranks are 2 nodes x 2, 3 ranks are 2 + 1.
  collectives::CommunicatorOptions twoPerNode;
  twoPerNode.test.ranksPerNode = 2;
  configs.push_back({"hierarchical", Backend::kHierarchical, twoPerNode});
  collectives::CommunicatorOptions twoPerNodePipelined = pipelined;
  twoPerNodePipelined.test.ranksPerNode = 2;
  configs.push_back({"hierarchical_pipelined", Backend::kHierarchical, twoPerNodePipelined});
  return configs;
}

std::unique_ptr<collectives::Communicator> makeCommunicator(const BackendConfig& config) {
  return collectives::makeCommunicator(config.backend, MPI_COMM_WORLD, config.options);
}

namespace {
std::uint64_t splitmix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
}  // namespace

std::uint64_t inputKey(std::uint64_t seed, int rank) {
  return splitmix(splitmix(seed) ^ static_cast<std::uint64_t>(rank) * 0xd6e8feb86659fd93ull);
}

double inputValue(DataType type, std::uint64_t key, std::size_t i) {
  const std::uint64_t h = splitmix(key + i * 0x632be59bd9b4e019ull);
  const double unit = static_cast<double>(h >> 11) * 0x1p-53;  // [0, 1)
  const double x = 2.0 * unit - 1.0;
  switch (type) {
    case DataType::kFloat32:
      return static_cast<float>(x);
    case DataType::kFloat64:
      return x;
    case DataType::kFloat16:
      return collectives::toFloat(collectives::toFloat16(static_cast<float>(x)));
    case DataType::kBFloat16:
      return collectives::toFloat(collectives::toBFloat16(static_cast<float>(x)));
    case DataType::kInt32:
      return static_cast<double>(static_cast<std::int64_t>(h % 2001) - 1000);
    case DataType::kInt64:
      return static_cast<double>(static_cast<std::int64_t>(h % 2000001) - 1000000);
  }
  return 0;
}

void fillInput(DataType type, std::uint64_t seed, int rank, std::size_t count, void* out) {
  const std::uint64_t key = inputKey(seed, rank);
  for (std::size_t i = 0; i < count; ++i) {
    const double v = inputValue(type, key, i);
    switch (type) {
      case DataType::kFloat32:
        static_cast<float*>(out)[i] = static_cast<float>(v);
        break;
      case DataType::kFloat64:
        static_cast<double*>(out)[i] = v;
        break;
      case DataType::kFloat16:
        static_cast<collectives::Float16*>(out)[i] = collectives::toFloat16(static_cast<float>(v));
        break;
      case DataType::kBFloat16:
        static_cast<collectives::BFloat16*>(out)[i] =
            collectives::toBFloat16(static_cast<float>(v));
        break;
      case DataType::kInt32:
        static_cast<std::int32_t*>(out)[i] = static_cast<std::int32_t>(v);
        break;
      case DataType::kInt64:
        static_cast<std::int64_t*>(out)[i] = static_cast<std::int64_t>(v);
        break;
    }
  }
}

double elementAt(DataType type, const void* data, std::size_t i) {
  switch (type) {
    case DataType::kFloat32:
      return static_cast<const float*>(data)[i];
    case DataType::kFloat64:
      return static_cast<const double*>(data)[i];
    case DataType::kFloat16:
      return collectives::toFloat(static_cast<const collectives::Float16*>(data)[i]);
    case DataType::kBFloat16:
      return collectives::toFloat(static_cast<const collectives::BFloat16*>(data)[i]);
    case DataType::kInt32:
      return static_cast<const std::int32_t*>(data)[i];
    case DataType::kInt64:
      return static_cast<double>(static_cast<const std::int64_t*>(data)[i]);
  }
  return 0;
}

double unitRoundoff(DataType type) {
  switch (type) {
    case DataType::kFloat32:
      return 0x1p-24;
    case DataType::kFloat64:
      return 0x1p-53;
    case DataType::kFloat16:
      return 0x1p-11;
    case DataType::kBFloat16:
      return 0x1p-8;
    default:
      return 0;
  }
}

std::size_t countDifferences(DataType type, collectives::ReduceOp op, std::uint64_t seed, int ranks,
                             std::size_t count, const void* result, const void* reference) {
  using collectives::ReduceOp;
  const bool exact = !isFloatingPoint(type) || op == ReduceOp::kMin || op == ReduceOp::kMax;
  if (exact) {
    // Integer sums are exact in any order; min and max do not round.
    std::size_t wrong = 0;
    const std::size_t e = sizeOf(type);
    for (std::size_t i = 0; i < count; ++i) {
      const auto* a = static_cast<const std::byte*>(result) + i * e;
      const auto* b = static_cast<const std::byte*>(reference) + i * e;
      wrong += std::memcmp(a, b, e) != 0;
    }
    return wrong;
  }
  std::size_t wrong = 0;
  const double u = unitRoundoff(type);
  for (std::size_t i = 0; i < count; ++i) {
    double absSum = 0;
    for (int r = 0; r < ranks; ++r)
      absSum += std::fabs(inputValue(type, inputKey(seed, r), i));
    double tolerance = 2 * (ranks + 1) * u * absSum;
    if (op == ReduceOp::kAverage) tolerance /= ranks;
    const double difference = elementAt(type, result, i) - elementAt(type, reference, i);
    wrong += !(std::fabs(difference) <= tolerance);
  }
  return wrong;
}

collectives::AlignedBuffer& scratchBuffer(int which) {
  static collectives::AlignedBuffer buffers[4];
  return buffers[which];
}

std::vector<int> ranksDifferingFromRankZero(std::uint64_t hash) {
  int size = 0;
  RINGTRAIN_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  std::vector<std::uint64_t> all(static_cast<std::size_t>(size));
  RINGTRAIN_MPI_CHECK(
      MPI_Allgather(&hash, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD));
  std::vector<int> differing;
  for (int r = 1; r < size; ++r) {
    if (all[r] != all[0]) differing.push_back(r);
  }
  return differing;
}

}  // namespace ringtrain::testing
