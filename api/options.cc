#include <cmath>
#include <optional>
#include <string>

#include "api/runtime.h"
#include "engine/exchange_options.h"
#include "options/exchange_settings.h"
#include "options/option_table.h"

namespace ringtrain::api {
namespace {

// The public enums in the order of the engine's, whose name tables they share.
constexpr engine::Compression kEngineCompression[] = {
    engine::Compression::kNone, engine::Compression::kFloat16, engine::Compression::kBFloat16};
constexpr engine::ExchangeBackend kEngineBackend[] = {
    engine::ExchangeBackend::kMpi,          engine::ExchangeBackend::kMpi,
    engine::ExchangeBackend::kRing,         engine::ExchangeBackend::kTuned,
    engine::ExchangeBackend::kHierarchical, engine::ExchangeBackend::kShm};  // [0]: kAuto

// The public header cannot include the engine's: its Options repeats the defaults, held equal here.
static_assert(Options{}.backend == Backend::kAuto && !engine::ExchangeSettings{}.backend);
static_assert(kEngineCompression[static_cast<int>(Options{}.compression)] ==
              engine::kDefaultCompression);
static_assert(Options{}.fusionThresholdBytes == engine::kDefaultFusionThresholdBytes);
static_assert(Options{}.overlap == engine::kDefaultOverlap);
static_assert(Options{}.stallTimeoutSeconds == engine::kDefaultStallTimeoutSeconds);
static_assert(Options{}.tuningFile.empty() && engine::ExchangeSettings{}.tuningFile.empty());

engine::ExchangeSettings settingsOf(const Options& options) {
  engine::ExchangeSettings settings;
  if (options.backend != Backend::kAuto)
    settings.backend = kEngineBackend[static_cast<int>(options.backend)];
  settings.tuningFile = options.tuningFile;
  settings.overlap = options.overlap;
  settings.fusionThresholdBytes = options.fusionThresholdBytes;
  settings.compression = engineCompression(options.compression);
  settings.stallTimeoutSeconds = options.stallTimeoutSeconds;
  return settings;
}

void checkFields(const Options& options) {
  if (!(options.stallTimeoutSeconds >= 0) || !std::isfinite(options.stallTimeoutSeconds)) {
    throw Error("Options::stallTimeoutSeconds must be a finite number, at least 0 (0: never)");
  }
  if (options.fusionThresholdBytes == 0) {
    throw Error("Options::fusionThresholdBytes must be positive");
  }
}

}  // namespace

engine::ExchangeSettings resolvedSettings(const Options& options) {
  checkFields(options);
  engine::ExchangeSettings settings = settingsOf(options);
  if (!options.readEnvironment) return settings;
  // The rows and readers of `ringtrain train` and `bench`: the same names, values and errors.
  static const auto rows = options::exchangeOptionRows<engine::ExchangeSettings>("");
  if (const auto error = options::readVariables(rows, settings)) throw Error(*error);
  if (settings.backend && engine::averagesDeviceBuffers(*settings.backend)) {
    throw Error("RINGTRAIN_BACKEND=" + std::string(engine::name(*settings.backend)) +
                ": the library averages host buffers: expected auto, mpi, ring, tuned, "
                "hierarchical or shm");
  }
  return settings;
}

engine::ExchangeBackend exchangeBackend(const Runtime& runtime, engine::Compression compression) {
  return runtime.backendChosen ? engine::autoHostBackend(compression, runtime.sharedNode)
                               : runtime.backend;
}

engine::Compression engineCompression(Compression compression) {
  return kEngineCompression[static_cast<std::size_t>(compression)];
}

}  // namespace ringtrain::api
