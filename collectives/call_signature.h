// What one rank believes the current collective is, so that ranks can compare before moving data.
#pragma once

#include <compare>
#include <cstdint>
#include <string>
#include <vector>

#include "collectives/data_type.h"

namespace ringtrain::collectives {

// kReduceScatter and kGatherShards: the halves of a split all-reduce (Communicator::reduceScatter).
enum class CollectiveKind : std::int64_t {
  kAllreduce,
  kBroadcast,
  kAllgather,
  kBarrier,
  kReduceScatter,
  kGatherShards
};

// All fields are int64 so that the struct travels as plain bytes inside a message header.
struct CallSignature {
  std::int64_t sequence = 0;   // the communicator's collective number
  std::int64_t kind = 0;       // CollectiveKind
  std::int64_t count = 0;      // elements (per rank, for an all-gather)
  std::int64_t dataType = 0;   // DataType
  std::int64_t reduceOp = -1;  // ReduceOp, -1 when the collective does not reduce
  std::int64_t root = -1;      // broadcast root, -1 otherwise

  auto operator<=>(const CallSignature&) const = default;
};

CallSignature makeSignature(std::uint64_t sequence, CollectiveKind kind, std::size_t count,
                            DataType type, int reduceOp = -1, int root = -1);

// "all-reduce #12 of 1000 float32 (sum)", "broadcast #3 of 10 int64 from rank 2".
std::string describe(const CallSignature& signature);

// An 8-byte stand-in for a signature that ranks can compare cheaply: a hash of all its fields,
// never equal to kDisagreement. Merging two tokens gives the token if they are equal and
// kDisagreement otherwise, so after merging along a recursive-doubling tree every rank holds the
// common token, or kDisagreement if any two ranks differed (a false agreement needs a 64-bit
// hash collision).
inline constexpr std::uint64_t kDisagreement = 0;
std::uint64_t agreementToken(const CallSignature& signature);
inline std::uint64_t mergeTokens(std::uint64_t a, std::uint64_t b) {
  return a == b ? a : kDisagreement;
}

// "ranks disagree on the collective: rank 0 calls all-reduce #5 of 10 float32 (sum), rank 3
// calls all-reduce #5 of 12 float32 (sum)": rank 0's call and the first rank's that differs.
// `signatures` holds every rank's, in rank order.
std::string disagreementMessage(const std::vector<CallSignature>& signatures);

}  // namespace ringtrain::collectives
