// The state behind ringtrain.h's free functions, shared by its implementation files: MPI, the
// communicator of the plain collectives, the stall watchdog, and the resolved settings.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "collectives/communicator.h"
#include "collectives/environment.h"
#include "collectives/stall_watchdog.h"
#include "engine/exchange_factory.h"
#include "ringtrain/ringtrain.h"

namespace ringtrain::api {

class NamedOperations;
class PointToPoint;

// Something start() made that shutdown() must close before MPI goes: an open GradientExchange.
class Closable {
 public:
  virtual ~Closable() = default;
  virtual void close() = 0;
};

struct Runtime {
  std::optional<collectives::MpiEnvironment> environment;
  engine::ExchangeBackend backend = engine::ExchangeBackend::kRing;
  bool backendChosen = false;  // Backend::kAuto resolved it (an exchange may choose again)
  bool sharedNode = false;     // several ranks, all on one node
  engine::ExchangeOptions exchangeOptions;
  std::unique_ptr<collectives::Communicator> control;  // allreduce, broadcast, allgather
  std::optional<collectives::StallWatchdog> watchdog;
  std::vector<Closable*> open;
  std::shared_ptr<NamedOperations> operations;  // submit()'s thread, started by start()
  std::shared_ptr<PointToPoint> pointToPoint;   // startSend(), startReceive()
};

// The runtime of a started job; throws Error "ringtrain::<call> called before ringtrain::start()"
// otherwise.
Runtime& startedRuntime(const char* call);

// Runs `body`, turning the internals' exceptions (ranks that disagree, a refused backend) into
// ringtrain::Error with the same text.
template <class Body>
auto translated(Body&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(e.what());
  }
}

// The exchange's settings of `options`, with the RINGTRAIN_* variables read over them (unless
// options.readEnvironment is false) as `ringtrain train` reads them, and checked. Throws Error
// naming the field or variable of a bad value.
engine::ExchangeSettings resolvedSettings(const Options& options);
// The backend of a gradient exchange with `compression`: the runtime's, except that kAuto chooses
// again for the exchange's compression (16 bits on the wire need a wire).
engine::ExchangeBackend exchangeBackend(const Runtime& runtime, engine::Compression compression);
engine::Compression engineCompression(Compression compression);

}  // namespace ringtrain::api
