// start(), shutdown() and the plain collectives of ringtrain.h.
#include "ringtrain/ringtrain.h"

#include <mpi.h>

#include "api/element_math.h"
#include "api/named_operations.h"
#include "api/point_to_point.h"
#include "api/runtime.h"
#include "collectives/data_type.h"
#include "collectives/device_collectives.h"

namespace ringtrain {
namespace {

// The job's state, shut down at exit when the program did not call shutdown(): MPI then ends
// with MPI_Finalize rather than with the launcher's complaint about a process that did not.
void shutdownRuntime(std::optional<api::Runtime>& runtime) {
  if (!runtime) return;
  // Newest first: each close() takes itself off the list.
  while (!runtime->open.empty())
    runtime->open.back()->close();
  if (runtime->watchdog && runtime->control) runtime->watchdog->unwatch(*runtime->control);
  runtime->watchdog.reset();
  runtime->control.reset();
  runtime->operations.reset();
  runtime->pointToPoint.reset();
  runtime.reset();  // the environment last: it finalises MPI if start() initialised it
}

struct RuntimeHolder {
  std::optional<api::Runtime> runtime;
  ~RuntimeHolder() { shutdownRuntime(runtime); }
};

RuntimeHolder& holder() {
  static RuntimeHolder instance;
  return instance;
}

// The engine's own type and op (api/element_math.h), or one line saying where the others go.
collectives::DataType internal(DataType type) {
  if (const auto engine = api::engineType(type)) return *engine;
  throw Error(
      "ringtrain: the plain collectives take float and 32/64-bit integer types; submit() "
      "takes the others");
}

collectives::ReduceOp internal(ReduceOp op) {
  if (const auto engine = api::engineOp(op)) return *engine;
  throw Error(
      "ringtrain: the plain all-reduce takes sum, average, min and max; submit() takes "
      "the product");
}

// MPI as the caller left it, or initialised here with the thread level the engine needs: its
// communication thread and the stall watchdog call MPI beside the caller's thread.
void joinMpi(api::Runtime& runtime) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) {
    runtime.environment.emplace(collectives::MpiEnvironment::Adopt{});
  } else {
    runtime.environment.emplace(nullptr, nullptr);
  }
  const collectives::ThreadLevel provided = runtime.environment->providedThreadLevel();
  if (provided != collectives::ThreadLevel::kMultiple) {
    throw Error(
        "ringtrain::start: the engine needs MPI_THREAD_MULTIPLE but this MPI provides " +
        std::string(collectives::threadLevelName(provided)) +
        (initialized ? " (initialise MPI with MPI_Init_thread(..., MPI_THREAD_MULTIPLE))" : ""));
  }
}

void startRuntime(api::Runtime& runtime, const Options& options) {
  // Bad settings before MPI starts.
  const engine::ExchangeSettings settings = api::resolvedSettings(options);
  joinMpi(runtime);
  runtime.sharedNode =
      runtime.environment->worldSize() > 1 && runtime.environment->nodeCount() == 1;
  runtime.backend = settings.backend.value_or(
      engine::autoHostBackend(engine::Compression::kNone, runtime.sharedNode));
  runtime.backendChosen = !settings.backend;
  runtime.exchangeOptions = engine::exchangeOptionsOf(settings);
  collectives::CommunicatorOptions control = engine::controlOptions(runtime.exchangeOptions);
  control.mpiAgreement = true;  // every backend compares the facade's calls (ringtrain.h)
  // A call may run beside the caller's computation (the DDP hook's thread while backward runs):
  // waiting yields the core instead of spinning on it.
  control.yieldWhileWaiting = true;
  runtime.control = api::translated([&] {
    return collectives::makeCommunicator(engine::controlBackend(runtime.backend),
                                         runtime.environment->world(), control);
  });
  if (settings.stallTimeoutSeconds > 0) {
    runtime.watchdog.emplace(runtime.environment->world(), settings.stallTimeoutSeconds);
    runtime.watchdog->watch(*runtime.control, "control");
  }
  runtime.operations =
      std::make_shared<api::NamedOperations>(runtime, settings.stallTimeoutSeconds);
  runtime.pointToPoint = std::make_shared<api::PointToPoint>(runtime.environment->world());
}

}  // namespace

namespace api {

Runtime& startedRuntime(const char* call) {
  std::optional<Runtime>& runtime = holder().runtime;
  if (!runtime || !runtime->control) {
    throw Error(std::string("ringtrain::") + call + " called before ringtrain::start()");
  }
  return *runtime;
}

}  // namespace api

void start(const Options& options) {
  std::optional<api::Runtime>& runtime = holder().runtime;
  if (runtime) throw Error("ringtrain::start called twice (call shutdown() first)");
  runtime.emplace();
  try {
    startRuntime(*runtime, options);
  } catch (...) {
    runtime.reset();
    throw;
  }
}

void shutdown() {
  shutdownRuntime(holder().runtime);
}

bool started() {
  return holder().runtime.has_value();
}

int rank() {
  return api::startedRuntime("rank").environment->worldRank();
}

int size() {
  return api::startedRuntime("size").environment->worldSize();
}

int localRank() {
  return api::startedRuntime("localRank").environment->localRank();
}

int localSize() {
  return api::startedRuntime("localSize").environment->localSize();
}

void allreduce(void* data, std::size_t count, DataType type, ReduceOp op) {
  collectives::Communicator& comm = *api::startedRuntime("allreduce").control;
  api::translated([&] { comm.allreduce(data, data, count, internal(type), internal(op)); });
}

void broadcast(void* data, std::size_t count, DataType type, int root) {
  collectives::Communicator& comm = *api::startedRuntime("broadcast").control;
  if (root < 0 || root >= comm.size()) {
    throw Error("ringtrain::broadcast: root " + std::to_string(root) + " is not a rank of " +
                std::to_string(comm.size()));
  }
  api::translated([&] { comm.broadcast(data, count, internal(type), root); });
}

void allgather(const void* send, void* recv, std::size_t countPerRank, DataType type) {
  collectives::Communicator& comm = *api::startedRuntime("allgather").control;
  api::translated([&] { comm.allgather(send, recv, countPerRank, internal(type)); });
}

void barrier() {
  collectives::Communicator& comm = *api::startedRuntime("barrier").control;
  api::translated([&] { comm.barrier(); });
}

std::int64_t startSend(const void* data, std::size_t bytes, int destination, int tag) {
  return api::startedRuntime("startSend").pointToPoint->startSend(data, bytes, destination, tag);
}

std::int64_t startReceive(void* data, std::size_t bytes, int source, int tag) {
  return api::startedRuntime("startReceive").pointToPoint->startReceive(data, bytes, source, tag);
}

void waitTransfer(std::int64_t handle) {
  // A copy of the pointer: shutdown() on another thread must not free it under the wait.
  const std::shared_ptr<api::PointToPoint> p2p = api::startedRuntime("waitTransfer").pointToPoint;
  p2p->wait(handle);
}

std::int64_t submit(const Operation& operation) {
  return api::startedRuntime("submit").operations->submit(operation);
}

int ncclVersion() {
  return collectives::ncclVersionCode();
}

bool poll(std::int64_t handle) {
  return api::startedRuntime("poll").operations->poll(handle);
}

OperationResult wait(std::int64_t handle) {
  return api::startedRuntime("wait").operations->wait(handle);
}

int addProcessSet(const std::vector<int>& ranks) {
  return api::startedRuntime("addProcessSet").operations->addProcessSet(ranks);
}

void removeProcessSet(int id) {
  api::startedRuntime("removeProcessSet").operations->removeProcessSet(id);
}

std::vector<int> processSetRanks(int id) {
  return api::startedRuntime("processSetRanks").operations->processSetRanks(id);
}

void startTimeline(const std::string& path) {
  api::startedRuntime("startTimeline").operations->startTimeline(path);
}

void stopTimeline() {
  api::startedRuntime("stopTimeline").operations->stopTimeline();
}

std::vector<int> processSetIds() {
  return api::startedRuntime("processSetIds").operations->processSetIds();
}

}  // namespace ringtrain
