// The gradient exchange's settings: ExchangeSettings, what a user chooses, with the one default of
// each (`ringtrain train` and `bench` hold it, options/exchange_settings.h declares the options and
// RINGTRAIN_* variables that set it, the library facade fills it from its Options); and
// ExchangeOptions, what every exchange is told (the reducers behind the communicators and the
// shared-memory one), made from the settings.
#pragma once

#include <cstddef>
#include <optional>
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

// How a training job averages its gradients: all-reduces of a communicator backend (mpi, ring,
// tuned, hierarchical on host buffers; nccl on device buffers), or shm, the shared-memory
// exchange of ranks that share one node (no messages). tuned takes each all-reduce's algorithm
// from a tuning table (collectives/tuned_communicator.h).
enum class ExchangeBackend { kMpi, kRing, kTuned, kHierarchical, kShm, kNccl };

// The one table of their names.
inline constexpr NamedValue<ExchangeBackend> kExchangeBackendNames[] = {
    {ExchangeBackend::kMpi, "mpi"},     {ExchangeBackend::kRing, "ring"},
    {ExchangeBackend::kTuned, "tuned"}, {ExchangeBackend::kHierarchical, "hierarchical"},
    {ExchangeBackend::kShm, "shm"},     {ExchangeBackend::kNccl, "nccl"},
};
std::string_view name(ExchangeBackend backend);

// The one default of each setting (the public header's Options is checked against them).
inline constexpr bool kDefaultOverlap = true;
inline constexpr std::size_t kDefaultFusionThresholdBytes = std::size_t{8} << 20;
inline constexpr Compression kDefaultCompression = Compression::kNone;
inline constexpr double kDefaultStallTimeoutSeconds = 300;

struct ExchangeSettings {
  std::optional<ExchangeBackend> backend;  // nullopt: auto (exchange_factory.h says which)
  std::string tuningFile;                  // tuned: the table ("": the built-in one)
  bool overlap = kDefaultOverlap;          // average while backward still runs
  std::size_t fusionThresholdBytes = kDefaultFusionThresholdBytes;  // largest bucket
  Compression compression = kDefaultCompression;
  double stallTimeoutSeconds = kDefaultStallTimeoutSeconds;  // abort, naming the late (0: never)

  bool operator==(const ExchangeSettings&) const = default;
};

struct ExchangeOptions {
  std::size_t fusionThresholdBytes = kDefaultFusionThresholdBytes;  // largest bucket
  bool overlap = kDefaultOverlap;  // average while backward still runs
  Compression compression = kDefaultCompression;
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

// The options of an exchange with `settings` (no ZeRO, no test hooks).
ExchangeOptions exchangeOptionsOf(const ExchangeSettings& settings);

}  // namespace ringtrain::engine
