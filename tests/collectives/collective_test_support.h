// Shared pieces of the collectives tests: backend configurations, seeded inputs that every rank
// can regenerate for any rank, reusable buffers, and a cross-rank bitwise comparison.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "collectives/aligned_buffer.h"
#include "collectives/communicator.h"

namespace ringtrain::testing {

// A backend and the options it is built with; `label` names it in test names.
struct BackendConfig {
  std::string label;
  collectives::Backend backend;
  collectives::CommunicatorOptions options;
};
// mpi; ring with its defaults; ring with every size sent round the ring in 4 KiB chunks and a
// pipeline of 2, so that small counts exercise many chunks, empty segments and slot reuse;
// hierarchical with every 2 ranks as one node, with its defaults and with the same 4 KiB chunks
// (every size then takes the three stages). The "_pipelined" ones skip the largest counts.
std::vector<BackendConfig> backendConfigs();
std::unique_ptr<collectives::Communicator> makeCommunicator(const BackendConfig& config);
// How GoogleTest prints a configuration in its messages.
inline void PrintTo(const BackendConfig& config, std::ostream* out) {
  *out << config.label;
}

// Names parameterised tests after the configuration's label.
struct BackendConfigName {
  template <class ParamInfo>
  std::string operator()(const ParamInfo& param) const {
    return param.param.label;
  }
};

// The stream of rank r's inputs in a test seeded with `seed`.
std::uint64_t inputKey(std::uint64_t seed, int rank);
// Element i of the stream `key`, as a double: floats in [-1, 1) (already rounded to the type, so
// the reference sees exactly the values sent), integers in a range whose sums cannot overflow.
double inputValue(collectives::DataType type, std::uint64_t key, std::size_t i);
// Writes rank r's `count` input elements of `type` into `out`.
void fillInput(collectives::DataType type, std::uint64_t seed, int rank, std::size_t count,
               void* out);
// Element i of a buffer of `type`, as a double.
double elementAt(collectives::DataType type, const void* data, std::size_t i);

// Unit roundoff of the type's arithmetic (0 for integers): tolerances of reductions that round
// once per hop.
double unitRoundoff(collectives::DataType type);

// The number of elements of `result` that differ from `reference` (the mpi backend's result for
// the inputs fillInput(type, seed, r, count) of `ranks` ranks) by more than two reassociations
// of the reduction allow: none for integers, min and max; for floating-point sums and averages
// 2 (ranks + 1) u times the sum of the inputs' magnitudes (divided by ranks for averages).
std::size_t countDifferences(collectives::DataType type, collectives::ReduceOp op,
                             std::uint64_t seed, int ranks, std::size_t count, const void* result,
                             const void* reference);

// Buffers that grow and are kept for the whole test program: first-touch page faults are slow
// (see aligned_buffer.h), and the large all-reduce tests would otherwise pay them in every test.
collectives::AlignedBuffer& scratchBuffer(int which);

// The ranks (of MPI_COMM_WORLD) whose `hash` differs from rank 0's; empty when all agree.
std::vector<int> ranksDifferingFromRankZero(std::uint64_t hash);

}  // namespace ringtrain::testing
