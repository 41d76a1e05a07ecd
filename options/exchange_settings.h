// The gradient exchange's settings as `ringtrain train` and `ringtrain bench` both take them:
// their option rows (declared once here, for both programs' tables), the check of their
// combination, --backend auto on host buffers and the tuning file, settled alike on every rank.
//
// A configuration holds them as its member `exchange` (engine::ExchangeSettings); the library
// facade reads its RINGTRAIN_* variables through the same rows, over the settings themselves.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <mpi.h>

#include "base/named_values.h"
#include "engine/exchange_factory.h"
#include "engine/exchange_options.h"
#include "options/option_table.h"

namespace ringtrain::options {

// --backend's choices: auto (nullopt), then the engine's table.
const std::vector<NamedValue<std::optional<engine::ExchangeBackend>>>& backendChoices();

// The option's value as the command line writes it: "auto" for no backend yet.
std::string_view name(const std::optional<engine::ExchangeBackend>& backend);

// --compression with --backend shm, which sends no messages to compress; nullopt when fine.
std::optional<std::string> compressionProblem(std::optional<engine::ExchangeBackend> backend,
                                              engine::Compression compression);

// --backend shm across nodes, refused before any rank builds a shared window it cannot have
// (with the exit status of every other bad option); nullopt when fine.
std::optional<std::string> placementProblem(std::optional<engine::ExchangeBackend> backend,
                                            int ranks, int nodes);

// Collective over `comm`, after the backend is settled: --tuning-file read once (rank 0 reads it)
// where the tuned backend will use it. Returns the one-line error for a file that cannot be read
// or parsed; a table of another layout or CPU is said once and `tuningFile` cleared, so that the
// communicators take the built-in table without saying it again.
std::optional<std::string> settleTuningFile(std::string& tuningFile,
                                            std::optional<engine::ExchangeBackend> backend,
                                            MPI_Comm comm);

// The gradient exchange's options, in `group` of --help, all saved in a checkpoint's
// configuration; every rank must agree on them but --tuning-file, a path on each node whose
// tables are agreed on at start (settleTuningFile).
template <class Config>
options::Table<Config> exchangeOptionRows(const std::string& group) {
  constexpr auto settingsOf = [](Config& c) -> engine::ExchangeSettings& {
    if constexpr (std::is_same_v<Config, engine::ExchangeSettings>)
      return c;
    else
      return c.exchange;
  };
  using options::with;
  constexpr auto kCompared = options::Agreement::kCompared;
  constexpr auto kPresence = options::Agreement::kPresenceCompared;
  constexpr bool kSaved = true;
#define RINGTRAIN_EXCHANGE_FIELD(m)   \
  [settingsOf](Config & c) -> auto& { \
    return settingsOf(c).m;           \
  }
  // clang-format off
  return {
      with(options::choice<Config>("backend", RINGTRAIN_EXCHANGE_FIELD(backend), backendChoices(), "how gradients are averaged; auto: shm where every rank shares one node (cpu), tuned across nodes, nccl on cuda; mpi, ring, tuned (each all-reduce's algorithm by its size, from --tuning-file), hierarchical, shm average host buffers, nccl GPU buffers"), group, kCompared, kSaved),
      with(options::text<Config>("tuning-file", RINGTRAIN_EXCHANGE_FIELD(tuningFile), "tuned backend: the table allreduce_perf --autotune wrote for this job's ranks (default: the built-in one; a table of other ranks or another CPU is ignored with a warning)"), group, kPresence),
      with(options::boolean<Config>("overlap", RINGTRAIN_EXCHANGE_FIELD(overlap), "average gradients while backward still runs", true), group, kCompared, kSaved),
      with(options::byteSize<Config>("fusion-threshold", RINGTRAIN_EXCHANGE_FIELD(fusionThresholdBytes), "largest gradient bucket (bytes; 64K, 8M, 8MiB, ...)"), group, kCompared, kSaved),
      with(options::choice<Config>("compression", RINGTRAIN_EXCHANGE_FIELD(compression), engine::kCompressionNames, "gradients cross the wire in 16 bits (ring, mpi, hierarchical)"), group, kCompared, kSaved),
      with(options::number<Config>("stall-timeout", RINGTRAIN_EXCHANGE_FIELD(stallTimeoutSeconds), {.min = 0, .hint = " (0 means never)"}, "abort the job, naming the missing ranks, when a collective waits this many seconds (a warning at half of it; 0: never)"), group, kCompared, kSaved),
  };
  // clang-format on
#undef RINGTRAIN_EXCHANGE_FIELD
}

}  // namespace ringtrain::options
