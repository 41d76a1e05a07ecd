// makeGradientExchange: the one place that maps a training job's gradient backend to the
// communicator and exchange that implement it. The trainer knows nothing more specific than
// GradientExchange.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <mpi.h>

#include "base/named_values.h"
#include "base/trace_sink.h"
#include "collectives/communicator.h"
#include "engine/bucket_plan.h"
#include "engine/exchange_options.h"
#include "engine/gradient_exchange.h"

namespace ringtrain::engine {

// Whether the backend averages device (GPU) buffers.
bool averagesDeviceBuffers(ExchangeBackend backend);
// The backend "auto" means on host buffers, for the programs and the library alike: shm where
// several ranks all share one node (no messages at all), unless compression asks for messages to
// compress; tuned otherwise.
ExchangeBackend autoHostBackend(Compression compression, bool sharedNode);

// Collective over `comm`: the exchange of `backend` for a model of `segments`. Throws
// std::invalid_argument on every rank for a combination the backend cannot do (shm across
// nodes, compression with shm or nccl, nccl in a build without the GPU path, ZeRO-1's
// options.shardUpdates with a backend whose all-reduce does not split: all but ring and tuned).
std::unique_ptr<GradientExchange> makeGradientExchange(ExchangeBackend backend, MPI_Comm comm,
                                                       std::vector<GradientSegment> segments,
                                                       const ExchangeOptions& options,
                                                       TraceSink* trace = nullptr);

// The host backend for the few small collectives of training beside the gradients (broadcasts,
// evaluation counts, logging): the exchange's own where it sends host messages, the ring
// otherwise (shm has no communicator; nccl's takes device buffers).
collectives::Backend controlBackend(ExchangeBackend backend);
// The options of that backend's communicator (the tuning file, the test hooks).
collectives::CommunicatorOptions controlOptions(const ExchangeOptions& options);

}  // namespace ringtrain::engine
