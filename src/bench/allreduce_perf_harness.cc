#include "src/bench/allreduce_perf_harness.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include <mpi.h>

#include "base/fingerprint.h"
#include "collectives/float16.h"
#include "collectives/mpi_check.h"
#include "options/startup_errors.h"

namespace ringtrain::allreduce_perf {
namespace {

// ---- Inputs and their exact results ----------------------------------------------------------
// Rank r's element i is a small integer that depends on (7i + 13r) mod 1021 only, so every sum,
// min and max is exact in every type and the expected result has period 1021: one table of 1021
// values checks a buffer of any size, quickly.
constexpr std::size_t kPeriod = 1021;

int inputInteger(int rank, std::size_t i, int range) {
  const std::size_t phase = (i * 7 + static_cast<std::size_t>(rank) * 13) % kPeriod;
  return static_cast<int>(phase % static_cast<std::size_t>(2 * range + 1)) - range;
}

void store(DataType type, double value, std::byte* out) {
  switch (type) {
    case DataType::kFloat32: {
      const float v = static_cast<float>(value);
      std::memcpy(out, &v, 4);
      break;
    }
    case DataType::kFloat64:
      std::memcpy(out, &value, 8);
      break;
    case DataType::kFloat16: {
      const auto v = collectives::toFloat16(static_cast<float>(value));
      std::memcpy(out, &v, 2);
      break;
    }
    case DataType::kBFloat16: {
      const auto v = collectives::toBFloat16(static_cast<float>(value));
      std::memcpy(out, &v, 2);
      break;
    }
    case DataType::kInt32: {
      const auto v = static_cast<std::int32_t>(value);
      std::memcpy(out, &v, 4);
      break;
    }
    case DataType::kInt64: {
      const auto v = static_cast<std::int64_t>(value);
      std::memcpy(out, &v, 8);
      break;
    }
  }
}

// The average as the backends compute it: the exact sum divided once in the type's working
// precision (float for the 16-bit types), truncating for integers.
double averageAsComputed(DataType type, std::int64_t sum, int ranks) {
  switch (type) {
    case DataType::kFloat64:
      return static_cast<double>(sum) / ranks;
    case DataType::kInt32:
    case DataType::kInt64:
      return static_cast<double>(sum / ranks);
    default:
      return static_cast<float>(sum) / static_cast<float>(ranks);
  }
}

Patterns allReducePatterns(DataType type, ReduceOp op, int rank, int ranks) {
  // Keep |sum| <= 256 so that sums are exact even in bfloat16.
  const int range = std::max(1, std::min(8, 256 / ranks));
  const std::size_t e = sizeOf(type);
  Patterns p{std::vector<std::byte>(kPeriod * e), std::vector<std::byte>(kPeriod * e)};
  for (std::size_t i = 0; i < kPeriod; ++i) {
    store(type, inputInteger(rank, i, range), p.input.data() + i * e);
    std::int64_t sum = 0;
    int lo = range, hi = -range;
    for (int r = 0; r < ranks; ++r) {
      const int v = inputInteger(r, i, range);
      sum += v;
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    const double expected = op == ReduceOp::kSum       ? static_cast<double>(sum)
                            : op == ReduceOp::kAverage ? averageAsComputed(type, sum, ranks)
                            : op == ReduceOp::kMin     ? lo
                                                       : hi;
    store(type, expected, p.expected.data() + i * e);
  }
  return p;
}

void fillPeriodic(std::byte* out, std::size_t count, const std::vector<std::byte>& pattern,
                  std::size_t elementSize) {
  const std::size_t bytes = count * elementSize;
  for (std::size_t offset = 0; offset < bytes; offset += pattern.size()) {
    std::memcpy(out + offset, pattern.data(), std::min(pattern.size(), bytes - offset));
  }
}

std::uint64_t countWrongElements(const std::byte* result, std::size_t count,
                                 const std::vector<std::byte>& expected, std::size_t elementSize) {
  std::uint64_t wrong = 0;
  for (std::size_t begin = 0; begin < count; begin += kPeriod) {
    const std::size_t n = std::min(kPeriod, count - begin);
    if (std::memcmp(result + begin * elementSize, expected.data(), n * elementSize) == 0) continue;
    for (std::size_t i = 0; i < n; ++i) {
      wrong += std::memcmp(result + (begin + i) * elementSize, expected.data() + i * elementSize,
                           elementSize) != 0;
    }
  }
  return wrong;
}

// Every rank must end with the expected values, and all with the same bytes: a rank whose bytes
// differ from rank 0's counts as one more wrong value.
std::uint64_t checkAllReduce(const std::byte* result, std::size_t count, const Patterns& patterns,
                             std::size_t elementSize) {
  const std::uint64_t wrong = countWrongElements(result, count, patterns.expected, elementSize);
  const std::uint64_t hash = fingerprint(result, count * elementSize);
  std::uint64_t rootHash = hash;
  RINGTRAIN_MPI_CHECK(MPI_Bcast(&rootHash, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD));
  return wrong + (hash != rootHash);
}

}  // namespace

const Collective kAllReduce{
    "allreduce", allReducePatterns,
    [](double algbw, int ranks) { return algbw * 2.0 * (ranks - 1) / ranks; },
    [](Communicator& comm, const std::byte* send, std::byte* recv, std::size_t count, DataType type,
       ReduceOp op) { comm.allreduce(send, recv, count, type, op); },
    checkAllReduce};

double combineTime(double seconds, int mode) {
  double result = seconds;
  if (mode == 0) {
    RINGTRAIN_MPI_CHECK(MPI_Bcast(&result, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD));
    return result;
  }
  const MPI_Op op = mode == 1 ? MPI_SUM : mode == 2 ? MPI_MIN : MPI_MAX;
  RINGTRAIN_MPI_CHECK(MPI_Allreduce(&seconds, &result, 1, MPI_DOUBLE, op, MPI_COMM_WORLD));
  if (mode == 1) {
    int size = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    result /= size;
  }
  return result;
}

void Buffers::fillSend(std::size_t count, const std::vector<std::byte>& pattern, std::size_t e) {
  fillPeriodic(host_[0].data(), count, pattern, e);
  if (device_[0]) bench::copyToDevice(device_[0]->data(), host_[0].data(), count * e);
}

std::optional<Buffers> allocateBuffers(std::size_t bytes, bool onDevice) {
  std::optional<Buffers> buffers;
  std::optional<std::string> error;
  try {
    buffers.emplace(bytes, onDevice);
  } catch (const std::bad_alloc&) {
    error = fmt::format(
        "allocating the two {} buffers of --maxbytes {} bytes ({:.2f} GiB) each failed "
        "(std::bad_alloc): lower --maxbytes or raise the memory limit",
        onDevice ? "host copies of the" : "host", bytes, static_cast<double>(bytes) / (1 << 30));
  }
  options::exitEverywhereOnError(error);
  return buffers;
}

namespace {

// One call into buffer `result`; under --blocking every rank then waits for all others.
void call(const Bench& bench, Communicator& comm, const Case& c, int result, std::size_t count) {
  bench.collective.run(comm, bench.buffers.data(0), bench.buffers.data(result), count, c.type,
                       c.op);
  if (bench.options.blocking) comm.barrier();
}

// Seconds per call on `count` elements into buffer `result`, after the untimed warm-up calls:
// --iters iterations of --agg_iters calls, combined over the ranks as --average says.
double timeCalls(const Bench& bench, Communicator& comm, const Case& c, int result,
                 std::size_t count) {
  const Options& o = bench.options;
  for (int i = 0; i < o.warmupIters; ++i)
    call(bench, comm, c, result, count);
  comm.barrier();
  const double start = MPI_Wtime();
  const long calls = static_cast<long>(o.iters) * o.aggIters;
  for (long i = 0; i < calls; ++i)
    call(bench, comm, c, result, count);
  return combineTime((MPI_Wtime() - start) / static_cast<double>(calls), o.average);
}

// Up to --check calls on fresh inputs, each checked, stopping at the first with wrong values:
// those wrong values, summed over the ranks (0 when every call was right).
std::int64_t checkCalls(const Bench& bench, Communicator& comm, const Case& c, int result,
                        std::size_t count) {
  const std::size_t e = sizeOf(c.type);
  std::uint64_t total = 0;
  for (int i = 0; i < bench.options.checkIters && total == 0; ++i) {
    bench.buffers.fillSend(count, c.patterns.input, e);
    call(bench, comm, c, result, count);
    std::byte* values = bench.buffers.onHost(result, count * e);
    if (bench.rank == bench.options.testWrongRank) values[0] ^= std::byte{0xff};
    std::uint64_t wrong = bench.collective.check(values, count, c.patterns, e);
    RINGTRAIN_MPI_CHECK(MPI_Allreduce(&wrong, &total, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD));
  }
  return static_cast<std::int64_t>(total);
}

}  // namespace

Measurement measure(const Bench& bench, Communicator& comm, const Case& c, std::size_t count,
                    bool inPlace) {
  const std::size_t e = sizeOf(c.type);
  const int result = inPlace ? 0 : 1;
  bench.buffers.fillSend(count, c.patterns.input, e);
  const double perCall = timeCalls(bench, comm, c, result, count);
  Measurement m;
  m.timeUs = perCall * 1e6;
  m.algbw = static_cast<double>(count * e) / perCall / 1e9;
  m.busbw = bench.collective.busBandwidth(m.algbw, comm.size());
  if (bench.options.checkIters > 0) m.wrong = checkCalls(bench, comm, c, result, count);
  return m;
}

std::vector<Case> makeCases(const Options& o, const Collective& collective, int rank, int ranks) {
  std::vector<Case> cases;
  for (const DataType type : o.types)
    for (const ReduceOp op : o.ops)
      cases.push_back({type, op, collective.patterns(type, op, rank, ranks)});
  return cases;
}

double measureMemoryBandwidth() {
  constexpr std::size_t kCount = std::size_t{16} << 20;  // 64 MiB per array
  AlignedBuffer a(kCount * 4), b(kCount * 4), c(kCount * 4);
  auto* x = reinterpret_cast<float*>(a.data());
  auto* y = reinterpret_cast<float*>(b.data());
  auto* z = reinterpret_cast<float*>(c.data());
  for (std::size_t i = 0; i < kCount; ++i) {
    x[i] = 1.0f;
    y[i] = 2.0f;
  }
  double best = 0;
  for (int repeat = 0; repeat < 5; ++repeat) {
    RINGTRAIN_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    const double start = MPI_Wtime();
#pragma omp simd
    for (std::size_t i = 0; i < kCount; ++i)
      z[i] = x[i] + y[i];
    const double seconds = MPI_Wtime() - start;
    best = std::max(best, 3.0 * kCount * 4 / seconds);
  }
  if (z[kCount / 2] != 3.0f) collectives::abortJob("memory bandwidth probe computed garbage");
  return best;
}

std::string mpiLibrary() {
  char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  MPI_Get_library_version(version, &length);
  std::string text(version, static_cast<std::size_t>(length));
  return text.substr(0, text.find_first_of(",\n"));
}

}  // namespace ringtrain::allreduce_perf
