// The thread behind ringtrain.h's named operations (Horovod's model).
//
// Each cycle every rank sends the operations submitted since the last one (their signatures, not
// their data) in one all-gather over the world; every rank adds them to the same table, in the
// same order, so every rank sees the same operations become ready in the same order. An
// operation is ready when every rank of its process set has submitted it (a rank that has
// joined stands in with zeros for an all-reduce). Ready all-reduces of one kind are fused; each
// ready operation runs on its set's communicator. Nothing is sent while a rank has nothing new:
// an idle thread cycles once a millisecond.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <mpi.h>

#include "api/runtime.h"
#include "collectives/communicator.h"
#include "collectives/device_collectives.h"
#include "engine/timeline.h"
#include "ringtrain/ringtrain.h"

namespace ringtrain::api {

// What every rank learns of an operation: all of Operation but its buffers.
struct Signature {
  OperationKind kind = OperationKind::kAllreduce;
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kAverage;
  double prescale = 1, postscale = 1;
  int root = 0;
  int processSet = 0;
  std::string name;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> splits;
  int device = -1;  // Operation::device: -1 host memory, else the rank's CUDA device
};

const char* kindName(OperationKind kind);
// Elements in one row (dimension 0) of `shape`; a scalar is one row of one.
std::int64_t rowElements(const std::vector<std::int64_t>& shape);
// Rows [first, first + count) of dimension 0 for rank `index` of `n` under Horovod's cut: the
// first ranks one row more where the rows do not split evenly.
struct RowBlock {
  std::int64_t first = 0, count = 0;
};
RowBlock rowBlock(std::int64_t rows, std::int64_t n, std::int64_t index);
// The rows an all-to-all of `s` sends to each of `n` ranks: its splits, or equal parts.
std::vector<std::int64_t> rowSplits(const Signature& s, std::size_t n);
std::int64_t elements(const std::vector<std::int64_t>& shape);
std::string shapeText(const std::vector<std::int64_t>& shape);
// An MPI request waited for without holding a core: tests (yielding at first when `quick`),
// then short sleeps.
void waitPolitely(MPI_Request& request, bool quick = true);

class NamedOperations final : public Closable {
 public:
  // Collective over the world: the thread starts here.
  explicit NamedOperations(Runtime& runtime, double stallTimeoutSeconds);
  ~NamedOperations() override;

  std::int64_t submit(const Operation& operation);
  bool poll(std::int64_t handle);
  OperationResult wait(std::int64_t handle);
  int addProcessSet(const std::vector<int>& ranks);
  void removeProcessSet(int id);
  std::vector<int> processSetRanks(int id);
  std::vector<int> processSetIds();
  void startTimeline(const std::string& path);
  void stopTimeline();
  // Collective: every rank says it stops; the thread ends once all have (operations still in
  // flight fail).
  void close() override;

  struct ProcessSet {
    std::vector<int> ranks;  // of the world, sorted
    int index = -1;          // this rank's place in `ranks`; -1: not a member
    MPI_Comm comm = MPI_COMM_NULL;
    std::unique_ptr<collectives::Communicator> engine;
    // NCCL over the set, made at its first device operation (api/device_execution.cc), and the
    // CUDA device each of its ranks (by index in `ranks`) took then.
    std::unique_ptr<collectives::DeviceCollectives> gpu;
    std::vector<int> gpuDevices;
    ~ProcessSet();
  };

 private:
  struct Slot {  // this rank's operation, from submit() to wait()
    Operation operation;
    std::string key;
    bool done = false;
    std::string error;
    OperationResult result;
  };
  struct Entry {  // an operation in the table every rank keeps alike
    std::vector<std::optional<Signature>> byRank;  // world ranks
    int submitted = 0;
    std::uint64_t order = 0;
    std::chrono::steady_clock::time_point seen;
  };
  struct Ready {
    std::string key;
    Entry entry;
  };

  // One operation or fused all-reduces as this rank runs it: its slot (null where a joined rank
  // stands in) and the signature the ranks agreed on.
  struct Item {
    Ready* ready = nullptr;
    Slot* slot = nullptr;
    const Signature* agreed = nullptr;
  };

  void checkArguments(const Operation& operation);
  void checkDeviceArguments(const std::string& what, const Operation& operation);
  std::unique_ptr<collectives::Communicator> makeEngine(MPI_Comm comm) const;
  void run();
  bool cycle();  // false once every rank has stopped
  std::vector<std::string> exchangeMessages(const std::string& mine, bool quick);
  void absorb(int rank, const std::string& message, std::vector<Ready>& ready);
  void collectReady(std::vector<Ready>& ready);
  bool complete(const Entry& entry, const ProcessSet& set) const;
  void execute(std::vector<Ready>& ready);
  void finishJoin(const std::string& key);
  std::vector<Item> fusedFrom(std::vector<Ready>& ready, std::size_t i, const ProcessSet& target,
                              std::size_t& bytes);
  void trace(const Signature& s, std::int64_t startNs, std::size_t bytes);
  void checkStalls();
  // "" when the ranks' signatures agree, else the error every rank reports.
  std::string disagreement(const Entry& entry, const ProcessSet& target) const;
  Item itemOf(Ready& ready);
  void runAllreduces(const std::vector<Item>& items, ProcessSet& target);
  void runGathered(const Item& item, ProcessSet& target);  // types and ops the engine lacks
  OperationResult runAllgather(const Item& item, ProcessSet& target);
  OperationResult runBroadcast(const Item& item, ProcessSet& target);
  OperationResult runAlltoall(const Item& item, ProcessSet& target);
  bool enginesCutFits(const Signature& s, ProcessSet& target) const;
  OperationResult runReducescatter(const Item& item, ProcessSet& target);
  OperationResult runOne(const Item& item, ProcessSet& target);
  // Device operations (api/device_execution.cc): every rank decides alike from the signatures.
  collectives::DeviceCollectives& deviceCollectives(const Item& item, ProcessSet& target);
  OperationResult runOnDevice(const Item& item, ProcessSet& target);
  void finish(const std::string& key, std::string error, OperationResult result = {});
  void failAll(const std::string& error);
  std::shared_ptr<ProcessSet> set(int id);

  Runtime& runtime_;
  double stallTimeoutSeconds_;
  int rank_ = 0, size_ = 1;
  MPI_Comm negotiation_ = MPI_COMM_NULL;   // the cycles' all-gathers (the thread's)
  MPI_Comm sets_ = MPI_COMM_NULL;          // addProcessSet's communicator creation (callers')
  MPI_Comm timelineComm_ = MPI_COMM_NULL;  // the timeline's start and gathering (callers')

  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::int64_t, Slot> slots_;
  std::map<std::string, std::int64_t> inFlight_;  // key -> handle
  std::vector<Signature> outbox_;
  std::map<int, std::shared_ptr<ProcessSet>> setsById_;
  std::int64_t nextHandle_ = 1;
  int nextSetId_ = 1;
  std::shared_ptr<engine::Timeline> timeline_;
  std::set<std::string> traceNames_;  // the names the timeline's spans point at (the thread's)
  bool stopping_ = false;
  bool stopped_ = false;

  // The thread's own state.
  std::map<std::string, Entry> table_;
  std::vector<bool> joined_;  // world ranks with a join in flight
  int lastJoined_ = -1;
  std::vector<bool> rankStopping_;
  std::uint64_t nextOrder_ = 0;
  int idleCycles_ = 0;                  // cycles in a row in which no rank had anything
  std::vector<unsigned char> scratch_;  // fused all-reduces, kept from cycle to cycle
  std::thread thread_;
};

}  // namespace ringtrain::api
