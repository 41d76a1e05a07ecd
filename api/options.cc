#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>

#include "api/runtime.h"
#include "base/boolean_text.h"
#include "base/byte_size.h"
#include "engine/exchange_options.h"

namespace ringtrain::api {
namespace {

// The public enums in the order of the engine's, whose name tables they share.
constexpr engine::Compression kEngineCompression[] = {
    engine::Compression::kNone, engine::Compression::kFloat16, engine::Compression::kBFloat16};

const char* variable(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

[[noreturn]] void badVariable(const char* name, const std::string& value,
                              const std::string& expected) {
  throw Error(std::string(name) + "=" + value + ": expected " + expected);
}

Backend backendNamed(const std::string& text) {
  if (text == "auto") return Backend::kAuto;
  const std::optional<engine::ExchangeBackend> found = valueIn(engine::kExchangeBackendNames, text);
  switch (found.value_or(engine::ExchangeBackend::kNccl)) {
    case engine::ExchangeBackend::kMpi:
      return Backend::kMpi;
    case engine::ExchangeBackend::kRing:
      return Backend::kRing;
    case engine::ExchangeBackend::kTuned:
      return Backend::kTuned;
    case engine::ExchangeBackend::kHierarchical:
      return Backend::kHierarchical;
    case engine::ExchangeBackend::kShm:
      return Backend::kShm;
    case engine::ExchangeBackend::kNccl:
      break;  // device buffers: not through this interface
  }
  badVariable("RINGTRAIN_BACKEND", text, "auto, mpi, ring, tuned, hierarchical or shm");
}

Compression compressionNamed(const std::string& text) {
  const auto found = valueIn(engine::kCompressionNames, text);
  if (!found)
    badVariable("RINGTRAIN_COMPRESSION", text, joinNames(engine::kCompressionNames, ", ", " or "));
  for (std::size_t i = 0; i < std::size(kEngineCompression); ++i) {
    if (kEngineCompression[i] == *found) return static_cast<Compression>(i);
  }
  return Compression::kNone;
}

// "65536", "64K", "8MiB", "1G": base/byte_size.h's sizes, as --fusion-threshold takes them.
std::size_t byteSizeNamed(const std::string& text) {
  const auto bytes = parseByteSize(text);
  if (!bytes || *bytes > (std::size_t{1} << 40))
    badVariable("RINGTRAIN_FUSION_THRESHOLD", text, "a size like 65536, 64K or 8M");
  return *bytes;
}

double secondsNamed(const std::string& text) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0' || !std::isfinite(value) || value < 0) {
    badVariable("RINGTRAIN_STALL_TIMEOUT", text, "seconds, at least 0 (0 means never)");
  }
  return value;
}

void applyEnvironment(Options& options) {
  if (const char* v = variable("RINGTRAIN_BACKEND")) options.backend = backendNamed(v);
  if (const char* v = variable("RINGTRAIN_COMPRESSION")) options.compression = compressionNamed(v);
  if (const char* v = variable("RINGTRAIN_FUSION_THRESHOLD"))
    options.fusionThresholdBytes = byteSizeNamed(v);
  if (const char* v = variable("RINGTRAIN_TUNING_FILE")) options.tuningFile = v;
  if (const char* v = variable("RINGTRAIN_STALL_TIMEOUT"))
    options.stallTimeoutSeconds = secondsNamed(v);
  if (const char* v = variable("RINGTRAIN_OVERLAP")) {
    const auto overlap = parseBoolean(v);
    if (!overlap) badVariable("RINGTRAIN_OVERLAP", v, "on or off (or true/false, yes/no, 1/0)");
    options.overlap = *overlap;
  }
}

}  // namespace

Options resolvedOptions(const Options& options) {
  Options resolved = options;
  if (resolved.readEnvironment) applyEnvironment(resolved);
  if (!(resolved.stallTimeoutSeconds >= 0) || !std::isfinite(resolved.stallTimeoutSeconds)) {
    throw Error("Options::stallTimeoutSeconds must be a finite number, at least 0 (0: never)");
  }
  if (resolved.fusionThresholdBytes == 0) {
    throw Error("Options::fusionThresholdBytes must be positive");
  }
  return resolved;
}

engine::ExchangeBackend engineBackend(Backend backend, bool sharedNode) {
  switch (backend) {
    case Backend::kAuto:
      return engine::autoHostBackend(engine::Compression::kNone, sharedNode);
    case Backend::kMpi:
      return engine::ExchangeBackend::kMpi;
    case Backend::kRing:
      return engine::ExchangeBackend::kRing;
    case Backend::kTuned:
      return engine::ExchangeBackend::kTuned;
    case Backend::kHierarchical:
      return engine::ExchangeBackend::kHierarchical;
    case Backend::kShm:
      return engine::ExchangeBackend::kShm;
  }
  throw Error("Options::backend: no such backend");
}

engine::ExchangeBackend exchangeBackend(const Runtime& runtime, engine::Compression compression) {
  return runtime.backendChosen ? engine::autoHostBackend(compression, runtime.sharedNode)
                               : runtime.backend;
}

engine::Compression engineCompression(Compression compression) {
  return kEngineCompression[static_cast<std::size_t>(compression)];
}

engine::ExchangeOptions engineOptions(const Options& options) {
  engine::ExchangeOptions exchange;
  exchange.fusionThresholdBytes = options.fusionThresholdBytes;
  exchange.overlap = options.overlap;
  exchange.compression = engineCompression(options.compression);
  exchange.stallTimeoutSeconds = options.stallTimeoutSeconds;
  exchange.tuningFile = options.tuningFile;
  return exchange;
}

}  // namespace ringtrain::api
