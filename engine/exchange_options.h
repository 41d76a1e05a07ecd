// What a gradient exchange is told: the one options struct of every exchange (the reducers
// behind the communicators and the shared-memory one), with the one default of each setting.
// `ringtrain train`'s and `bench`'s --fusion-threshold, --overlap, --compression, --stall-timeout
// and --tuning-file fill it (options/exchange_settings.h), and so does the facade (api/).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "base/named_values.h"
#include "collectives/communicator.h"
#include "engine/gradient_exchange.h"

namespace ringtrain::engine {

// How a bucket crosses the wire: as it is, or in 16 bits (fp16, bf16).
enum class Compression { kNone, kFloat16, kBFloat16 };
inline constexpr NamedValue<Compression> kCompressionNames[] = {{Compression::kNone, "none"},
                                                                {Compression::kFloat16, "fp16"},
                                                                {Compression::kBFloat16, "bf16"}};
std::string_view name(Compression compression);

inline constexpr std::size_t kDefaultFusionThresholdBytes = std::size_t{8} << 20;
inline constexpr double kDefaultStallTimeoutSeconds = 300;

struct ExchangeOptions {
  std::size_t fusionThresholdBytes = kDefaultFusionThresholdBytes;  // largest bucket
  bool overlap = true;  // average while backward still runs
  Compression compression = Compression::kNone;
  Reduction reduction = Reduction::kAverage;  // the mean over the ranks, or their sum
  // ZeRO-1: every rank updates its shard of each bucket only (gradient_exchange.h: shards()),
  // on communicators that split their all-reduce (Communicator::splitsAllreduce).
  bool shardUpdates = false;
  double stallTimeoutSeconds = kDefaultStallTimeoutSeconds;  // shm's own waits (0: never)
  std::string tuningFile;  // tuned: the table (empty: the built-in one)
  // shm's work unit: small enough that the last rank to finish backward shares the tail with
  // the others, large enough that taking a ticket (one atomic on a shared line) costs nothing.
  std::size_t pieceBytes = std::size_t{64} << 10;
  // Test-only: rank test.stallRank never takes part in collective (shm: step) test.stallCollective.
  collectives::CommunicatorTestHooks test;
};

}  // namespace ringtrain::engine
