#include "engine/exchange_factory.h"

#include <stdexcept>
#include <string>

#include "engine/gradient_reducer.h"
#include "engine/shared_gradient_reducer.h"

namespace ringtrain::engine {
namespace {

collectives::Backend communicatorBackend(ExchangeBackend backend) {
  switch (backend) {
    case ExchangeBackend::kMpi:
      return collectives::Backend::kMpi;
    case ExchangeBackend::kHierarchical:
      return collectives::Backend::kHierarchical;
    case ExchangeBackend::kNccl:
      return collectives::Backend::kNccl;
    case ExchangeBackend::kTuned:
      return collectives::Backend::kTuned;
    case ExchangeBackend::kRing:
    case ExchangeBackend::kShm:
      break;
  }
  return collectives::Backend::kRing;
}

}  // namespace

std::string_view name(ExchangeBackend backend) {
  return nameIn(kExchangeBackendNames, backend);
}

ExchangeOptions exchangeOptionsOf(const ExchangeSettings& settings) {
  ExchangeOptions options;
  options.fusionThresholdBytes = settings.fusionThresholdBytes;
  options.overlap = settings.overlap;
  options.compression = settings.compression;
  options.stallTimeoutSeconds = settings.stallTimeoutSeconds;
  options.tuningFile = settings.tuningFile;
  return options;
}

ExchangeBackend autoHostBackend(Compression compression, bool sharedNode) {
  return sharedNode && compression == Compression::kNone ? ExchangeBackend::kShm
                                                         : ExchangeBackend::kTuned;
}

bool averagesDeviceBuffers(ExchangeBackend backend) {
  return backend == ExchangeBackend::kNccl;
}

collectives::Backend controlBackend(ExchangeBackend backend) {
  return backend == ExchangeBackend::kNccl ? collectives::Backend::kRing
                                           : communicatorBackend(backend);
}

collectives::CommunicatorOptions controlOptions(const ExchangeOptions& options) {
  collectives::CommunicatorOptions communicatorOptions;
  communicatorOptions.tuningFile = options.tuningFile;
  return communicatorOptions;
}

std::unique_ptr<GradientExchange> makeGradientExchange(ExchangeBackend backend, MPI_Comm comm,
                                                       std::vector<GradientSegment> segments,
                                                       const ExchangeOptions& options,
                                                       TraceSink* trace) {
  if (options.compression != Compression::kNone &&
      (backend == ExchangeBackend::kShm || averagesDeviceBuffers(backend))) {
    throw std::invalid_argument("compression " + std::string(name(options.compression)) +
                                " is not available with backend " + std::string(name(backend)));
  }
  if (options.shardUpdates &&
      (backend == ExchangeBackend::kShm || averagesDeviceBuffers(backend))) {
    throw std::invalid_argument(
        "sharding the optimiser state (ZeRO-1) is not available with backend " +
        std::string(name(backend)) + ": use ring or tuned");
  }
  if (backend == ExchangeBackend::kShm) {
    return std::make_unique<SharedGradientReducer>(comm, std::move(segments), options, trace);
  }
  // The reducer drives its communicator from its own thread with overlap: it yields while it
  // waits, so that backward keeps the core (and does so with overlap off too, so that both modes
  // run the very same collectives).
  collectives::CommunicatorOptions communicatorOptions = controlOptions(options);
  communicatorOptions.yieldWhileWaiting = true;
  communicatorOptions.test = options.test;
  return std::make_unique<GradientReducer>(
      collectives::makeCommunicator(communicatorBackend(backend), comm, communicatorOptions),
      std::move(segments), options, trace);
}

}  // namespace ringtrain::engine
