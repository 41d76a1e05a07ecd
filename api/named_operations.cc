#include "api/named_operations.h"

#include <sched.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <numeric>
#include <sstream>

#include "api/element_math.h"
#include "base/steady_clock.h"
#include "collectives/mpi_check.h"
#include "collectives/request_wait.h"

namespace ringtrain::api {
namespace {

using Clock = std::chrono::steady_clock;
// How long a cycle waits for a submission: one with operations in flight (here or on any rank)
// waits for the other ranks' submissions, which arrive in their cycles, so it comes back soon; an
// idle one has nothing to wait for, and after a while of idling waits longer, so that a job that
// uses no named operations pays next to nothing for the thread. A submission wakes it at once.
constexpr auto kBusyCycle = std::chrono::microseconds(50);
constexpr auto kIdleCycle = std::chrono::milliseconds(1);
constexpr auto kLongIdleCycle = std::chrono::milliseconds(10);
constexpr int kCyclesBeforeLongIdle = 100;

}  // namespace

std::int64_t elements(const std::vector<std::int64_t>& shape) {
  return std::accumulate(shape.begin(), shape.end(), std::int64_t{1}, std::multiplies<>());
}

std::string shapeText(const std::vector<std::int64_t>& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

void waitPolitely(MPI_Request& request, bool quick) {
  // Yielding for the first 100 us keeps a quick answer quick (a sleep lasts at least the
  // kernel's timer slack, ~50 us); a longer wait, or an idle one, sleeps, leaving the core to the
  // computation.
  const auto yieldUntil =
      std::chrono::steady_clock::now() + std::chrono::microseconds(quick ? 100 : 0);
  for (;;) {
    int done = 0;
    RINGTRAIN_MPI_CHECK(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
    if (done) return;
    if (std::chrono::steady_clock::now() < yieldUntil) {
      sched_yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
}

const char* kindName(OperationKind kind) {
  static const char* const kNames[] = {"allreduce",     "allgather", "broadcast", "alltoall",
                                       "reducescatter", "barrier",   "join"};
  return kNames[static_cast<int>(kind)];
}

namespace {

std::string keyOf(int processSet, const std::string& name) {
  return std::to_string(processSet) + ":" + name;
}

// The wire form of a cycle's message: a stop flag, then the new signatures.
class Writer {
 public:
  template <class T>
  void put(const T& value) {
    text_.append(reinterpret_cast<const char*>(&value), sizeof(value));
  }
  void put(const std::string& value) {
    put(value.size());
    text_ += value;
  }
  void put(const std::vector<std::int64_t>& values) {
    put(values.size());
    for (std::int64_t v : values)
      put(v);
  }
  std::string text_;
};

class Reader {
 public:
  explicit Reader(const std::string& text) : text_(text) {}
  template <class T>
  void get(T& value) {
    std::memcpy(&value, text_.data() + at_, sizeof(value));
    at_ += sizeof(value);
  }
  void get(std::string& value) {
    std::size_t n = 0;
    get(n);
    value = text_.substr(at_, n);
    at_ += n;
  }
  void get(std::vector<std::int64_t>& values) {
    std::size_t n = 0;
    get(n);
    values.resize(n);
    for (auto& v : values)
      get(v);
  }
  bool done() const { return at_ >= text_.size(); }

 private:
  const std::string& text_;
  std::size_t at_ = 0;
};

void write(Writer& w, const Signature& s) {
  w.put(s.kind), w.put(s.type), w.put(s.op), w.put(s.prescale), w.put(s.postscale);
  w.put(s.root), w.put(s.processSet), w.put(s.name), w.put(s.shape), w.put(s.splits);
  w.put(s.device);
}

Signature read(Reader& r) {
  Signature s;
  r.get(s.kind), r.get(s.type), r.get(s.op), r.get(s.prescale), r.get(s.postscale);
  r.get(s.root), r.get(s.processSet), r.get(s.name), r.get(s.shape), r.get(s.splits);
  r.get(s.device);
  return s;
}

}  // namespace

NamedOperations::ProcessSet::~ProcessSet() {
  gpu.reset();
  engine.reset();
  if (comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
}

NamedOperations::NamedOperations(Runtime& runtime, double stallTimeoutSeconds)
    : runtime_(runtime), stallTimeoutSeconds_(stallTimeoutSeconds) {
  MPI_Comm world = runtime.environment->world();
  RINGTRAIN_MPI_CHECK(MPI_Comm_rank(world, &rank_));
  RINGTRAIN_MPI_CHECK(MPI_Comm_size(world, &size_));
  RINGTRAIN_MPI_CHECK(MPI_Comm_dup(world, &negotiation_));
  RINGTRAIN_MPI_CHECK(MPI_Comm_dup(world, &sets_));
  RINGTRAIN_MPI_CHECK(MPI_Comm_dup(world, &timelineComm_));
  std::vector<int> everyone(static_cast<std::size_t>(size_));
  std::iota(everyone.begin(), everyone.end(), 0);
  joined_.assign(everyone.size(), false);
  rankStopping_.assign(everyone.size(), false);
  auto global = std::make_shared<ProcessSet>();
  global->ranks = everyone;
  global->index = rank_;
  RINGTRAIN_MPI_CHECK(MPI_Comm_dup(world, &global->comm));
  global->engine = translated([&] { return makeEngine(global->comm); });
  setsById_[0] = global;
  runtime.open.push_back(this);
  thread_ = std::thread([this] { run(); });
}

NamedOperations::~NamedOperations() {
  close();
}

std::unique_ptr<collectives::Communicator> NamedOperations::makeEngine(MPI_Comm comm) const {
  collectives::CommunicatorOptions options = engine::controlOptions(runtime_.exchangeOptions);
  options.yieldWhileWaiting = true;  // the thread shares its core with the caller's work
  return collectives::makeCommunicator(engine::controlBackend(runtime_.backend), comm, options);
}

std::shared_ptr<NamedOperations::ProcessSet> NamedOperations::set(int id) {
  std::lock_guard lock(mutex_);
  auto it = setsById_.find(id);
  return it == setsById_.end() ? nullptr : it->second;
}

// ---- the callers' side ----

std::int64_t NamedOperations::submit(const Operation& operation) {
  checkArguments(operation);
  Signature s{operation.kind,      operation.type,   operation.op,         operation.prescale,
              operation.postscale, operation.root,   operation.processSet, operation.name,
              operation.shape,     operation.splits, operation.device};
  const std::string key = keyOf(s.processSet, s.name);
  std::lock_guard lock(mutex_);
  if (stopping_ || stopped_) throw Error("ringtrain::submit: the named operations have stopped");
  if (inFlight_.count(key)) {
    throw InvalidArgument(std::string("ringtrain: ") + kindName(s.kind) + " '" + s.name +
                          "': an operation of this name is already in flight on rank " +
                          std::to_string(rank_));
  }
  const std::int64_t handle = nextHandle_++;
  slots_[handle] = Slot{operation, key, false, {}, {}};
  inFlight_[key] = handle;
  outbox_.push_back(std::move(s));
  changed_.notify_all();
  return handle;
}

void NamedOperations::checkArguments(const Operation& op) {
  const std::string what = std::string("ringtrain: ") + kindName(op.kind) + " '" + op.name + "'";
  const std::shared_ptr<ProcessSet> target = set(op.processSet);
  if (!target)
    throw InvalidArgument(what + ": unknown process set " + std::to_string(op.processSet));
  if (target->index < 0) {
    throw InvalidArgument(what + ": rank " + std::to_string(rank_) + " is not in process set " +
                          std::to_string(op.processSet));
  }
  for (std::int64_t d : op.shape)
    if (d < 0) throw InvalidArgument(what + ": negative dimension in " + shapeText(op.shape));
  if (op.device >= 0) checkDeviceArguments(what, op);
  const auto n = static_cast<std::int64_t>(target->ranks.size());
  switch (op.kind) {
    case OperationKind::kAllreduce:
    case OperationKind::kReducescatter:
      if (!reducible(op.type, op.op)) {
        throw InvalidArgument(what + ": " + opName(op.op) + " of " + typeName(op.type) +
                              " means nothing");
      }
      if (op.kind == OperationKind::kReducescatter && op.shape.empty())
        throw InvalidArgument(what + ": a scalar cannot be scattered");
      break;
    case OperationKind::kBroadcast:
      if (std::find(target->ranks.begin(), target->ranks.end(), op.root) == target->ranks.end()) {
        throw InvalidArgument(what + ": root " + std::to_string(op.root) +
                              " is not a rank of process set " + std::to_string(op.processSet));
      }
      break;
    case OperationKind::kAlltoall: {
      if (op.shape.empty()) throw InvalidArgument(what + ": a scalar cannot be split");
      if (op.splits.empty()) {
        if (op.shape[0] % n != 0) {
          throw InvalidArgument(what + ": " + std::to_string(op.shape[0]) +
                                " rows do not split evenly over " + std::to_string(n) + " ranks");
        }
      } else if (static_cast<std::int64_t>(op.splits.size()) != n ||
                 std::any_of(op.splits.begin(), op.splits.end(), [](auto s) { return s < 0; }) ||
                 std::accumulate(op.splits.begin(), op.splits.end(), std::int64_t{0}) !=
                     op.shape[0]) {
        throw InvalidArgument(what + ": splits must be " + std::to_string(n) +
                              " counts of rows, not negative, adding up to " +
                              std::to_string(op.shape[0]));
      }
      break;
    }
    default:
      break;
  }
}

// A device operation's own checks, on the submitting rank: the build, the type, the buffers.
void NamedOperations::checkDeviceArguments(const std::string& what, const Operation& op) {
  if (!collectives::deviceCollectivesBuilt()) {
    throw InvalidArgument(what + ": device " + std::to_string(op.device) +
                          ": this build of ringtrain has no GPU path (host memory only)");
  }
  const bool moves = op.kind != OperationKind::kBarrier && op.kind != OperationKind::kJoin;
  if (moves && op.type == DataType::kInt16) {
    throw InvalidArgument(what +
                          ": int16 on the GPU: NCCL has no 16-bit integers (use int32, or "
                          "host memory)");
  }
  const std::size_t bytes = static_cast<std::size_t>(elements(op.shape)) * sizeOf(op.type);
  std::string problem = moves ? collectives::devicePointerProblem(op.input, bytes, op.device) : "";
  const bool writesOutput =
      op.kind == OperationKind::kAllreduce || op.kind == OperationKind::kBroadcast;
  if (problem.empty() && writesOutput)
    problem = collectives::devicePointerProblem(op.output, bytes, op.device);
  if (!problem.empty())
    throw InvalidArgument(what + ": device " + std::to_string(op.device) + ": " + problem);
}

bool NamedOperations::poll(std::int64_t handle) {
  std::lock_guard lock(mutex_);
  auto it = slots_.find(handle);
  if (it == slots_.end())
    throw InvalidArgument("ringtrain::poll: unknown handle " + std::to_string(handle));
  return it->second.done;
}

OperationResult NamedOperations::wait(std::int64_t handle) {
  std::unique_lock lock(mutex_);
  auto it = slots_.find(handle);
  if (it == slots_.end())
    throw InvalidArgument("ringtrain::wait: unknown handle " + std::to_string(handle));
  changed_.wait(lock, [&] { return it->second.done; });
  Slot slot = std::move(it->second);
  slots_.erase(it);
  if (!slot.error.empty()) throw Error(slot.error);
  return std::move(slot.result);
}

int NamedOperations::addProcessSet(const std::vector<int>& ranks) {
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  if (sorted.empty() || std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end() ||
      sorted.front() < 0 || sorted.back() >= size_) {
    throw InvalidArgument("ringtrain::addProcessSet: ranks must be distinct ranks of the world");
  }
  auto added = std::make_shared<ProcessSet>();
  added->ranks = sorted;
  auto me = std::find(sorted.begin(), sorted.end(), rank_);
  added->index = me == sorted.end() ? -1 : static_cast<int>(me - sorted.begin());
  MPI_Group world = MPI_GROUP_NULL, group = MPI_GROUP_NULL;
  RINGTRAIN_MPI_CHECK(MPI_Comm_group(sets_, &world));
  RINGTRAIN_MPI_CHECK(
      MPI_Group_incl(world, static_cast<int>(sorted.size()), sorted.data(), &group));
  RINGTRAIN_MPI_CHECK(MPI_Comm_create(sets_, group, &added->comm));
  MPI_Group_free(&group);
  MPI_Group_free(&world);
  if (added->comm != MPI_COMM_NULL)
    added->engine = translated([&] { return makeEngine(added->comm); });
  std::lock_guard lock(mutex_);
  const int id = nextSetId_++;
  setsById_[id] = added;
  return id;
}

void NamedOperations::removeProcessSet(int id) {
  std::shared_ptr<ProcessSet> removed;
  {
    std::lock_guard lock(mutex_);
    auto it = setsById_.find(id);
    if (id == 0 || it == setsById_.end()) {
      throw InvalidArgument("ringtrain::removeProcessSet: no process set " + std::to_string(id) +
                            " to remove");
    }
    const std::string prefix = std::to_string(id) + ":";
    for (const auto& [key, handle] : inFlight_) {
      if (key.rfind(prefix, 0) == 0) {
        throw InvalidArgument("ringtrain::removeProcessSet: set " + std::to_string(id) +
                              " has operations in flight");
      }
    }
    removed = it->second;
    setsById_.erase(it);
  }
  RINGTRAIN_MPI_CHECK(MPI_Barrier(sets_));  // collective, as its creation was
}

std::vector<int> NamedOperations::processSetRanks(int id) {
  const std::shared_ptr<ProcessSet> found = set(id);
  if (!found) throw InvalidArgument("ringtrain: no process set " + std::to_string(id));
  return found->ranks;
}

std::vector<int> NamedOperations::processSetIds() {
  std::lock_guard lock(mutex_);
  std::vector<int> ids;
  for (const auto& [id, _] : setsById_)
    ids.push_back(id);
  return ids;
}

void NamedOperations::startTimeline(const std::string& path) {
  {
    std::lock_guard lock(mutex_);
    if (timeline_) throw InvalidArgument("ringtrain::startTimeline: a timeline is open already");
  }
  auto opened = translated([&] {
    return std::make_shared<engine::Timeline>(path, timelineComm_,
                                              runtime_.environment->hostName());
  });
  std::lock_guard lock(mutex_);
  timeline_ = std::move(opened);
}

void NamedOperations::stopTimeline() {
  std::shared_ptr<engine::Timeline> closing;
  {
    std::lock_guard lock(mutex_);
    closing.swap(timeline_);
  }
  if (closing) translated([&] { closing->finish(); });
}

void NamedOperations::trace(const Signature& s, std::int64_t startNs, std::size_t bytes) {
  std::shared_ptr<engine::Timeline> timeline;
  {
    std::lock_guard lock(mutex_);
    timeline = timeline_;
  }
  if (!timeline) return;
  const std::string& name = *traceNames_.insert(s.name).first;
  timeline->span(name, kindName(s.kind), startNs, steadyNowNs(), static_cast<std::int64_t>(bytes));
}

void NamedOperations::close() {
  {
    std::lock_guard lock(mutex_);
    if (stopped_ || !thread_.joinable()) return;
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
  failAll("ringtrain: shut down before the operation completed");
  std::lock_guard lock(mutex_);
  stopped_ = true;
  setsById_.clear();
  if (negotiation_ != MPI_COMM_NULL) MPI_Comm_free(&negotiation_);
  if (sets_ != MPI_COMM_NULL) MPI_Comm_free(&sets_);
  timeline_.reset();  // unfinished: its part files stay
  if (timelineComm_ != MPI_COMM_NULL) MPI_Comm_free(&timelineComm_);
  std::erase(runtime_.open, static_cast<Closable*>(this));
}

void NamedOperations::finish(const std::string& key, std::string error, OperationResult result) {
  std::lock_guard lock(mutex_);
  auto it = inFlight_.find(key);
  if (it == inFlight_.end()) return;  // a joined rank's stand-in
  Slot& slot = slots_.at(it->second);
  slot.done = true;
  slot.error = std::move(error);
  slot.result = std::move(result);
  inFlight_.erase(it);
  changed_.notify_all();
}

void NamedOperations::failAll(const std::string& error) {
  std::lock_guard lock(mutex_);
  for (auto& [handle, slot] : slots_) {
    if (!slot.done) slot.done = true, slot.error = error;
  }
  inFlight_.clear();
  changed_.notify_all();
}

// ---- the thread ----

void NamedOperations::run() {
  try {
    while (cycle()) {
    }
  } catch (const std::exception& e) {
    failAll(e.what());
    collectives::abortJob(std::string("ringtrain: named operations: ") + e.what());
  }
}

bool NamedOperations::cycle() {
  std::vector<Signature> mine;
  bool stopping = false;
  {
    std::unique_lock lock(mutex_);
    std::chrono::microseconds wait = kBusyCycle;
    if (inFlight_.empty() && table_.empty())
      wait = idleCycles_ < kCyclesBeforeLongIdle ? kIdleCycle : kLongIdleCycle;
    changed_.wait_for(lock, wait, [&] { return !outbox_.empty(); });
    mine.swap(outbox_);
    stopping = stopping_;
  }
  Writer w;
  w.put(stopping);
  for (const Signature& s : mine)
    write(w, s);
  const bool quick = !mine.empty() || !table_.empty() || stopping;
  const std::vector<std::string> messages = exchangeMessages(w.text_, quick);
  const bool heard = std::any_of(messages.begin(), messages.end(),
                                 [](const std::string& m) { return m.size() > sizeof(bool); });
  idleCycles_ = heard || !table_.empty() ? 0 : idleCycles_ + 1;
  std::vector<Ready> ready;
  for (int r = 0; r < size_; ++r)
    absorb(r, messages[static_cast<std::size_t>(r)], ready);
  collectReady(ready);
  execute(ready);
  checkStalls();
  return !std::all_of(rankStopping_.begin(), rankStopping_.end(), [](bool s) { return s; });
}

std::vector<std::string> NamedOperations::exchangeMessages(const std::string& mine, bool quick) {
  int length = static_cast<int>(mine.size());
  std::vector<int> lengths(static_cast<std::size_t>(size_)), offsets(lengths.size(), 0);
  MPI_Request request = MPI_REQUEST_NULL;
  RINGTRAIN_MPI_CHECK(
      MPI_Iallgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, negotiation_, &request));
  waitPolitely(request, quick);
  for (std::size_t r = 1; r < lengths.size(); ++r)
    offsets[r] = offsets[r - 1] + lengths[r - 1];
  std::string all(static_cast<std::size_t>(offsets.back() + lengths.back()), '\0');
  RINGTRAIN_MPI_CHECK(MPI_Iallgatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(),
                                      offsets.data(), MPI_CHAR, negotiation_, &request));
  waitPolitely(request, quick);
  std::vector<std::string> messages;
  for (std::size_t r = 0; r < lengths.size(); ++r)
    messages.push_back(
        all.substr(static_cast<std::size_t>(offsets[r]), static_cast<std::size_t>(lengths[r])));
  return messages;
}

void NamedOperations::absorb(int rank, const std::string& message, std::vector<Ready>& ready) {
  Reader reader(message);
  bool stopping = false;
  reader.get(stopping);
  rankStopping_[static_cast<std::size_t>(rank)] = stopping;
  while (!reader.done()) {
    Signature s = read(reader);
    const std::string key = keyOf(s.processSet, s.name);
    auto [it, added] = table_.try_emplace(key);
    Entry& entry = it->second;
    if (added) {
      entry.byRank.resize(static_cast<std::size_t>(size_));
      entry.order = nextOrder_++;
      entry.seen = Clock::now();
    }
    if (s.kind == OperationKind::kJoin) {
      joined_[static_cast<std::size_t>(rank)] = true;
      lastJoined_ = rank;
    }
    entry.byRank[static_cast<std::size_t>(rank)] = std::move(s);
    ++entry.submitted;
    const std::shared_ptr<ProcessSet> target =
        set(entry.byRank[static_cast<std::size_t>(rank)]->processSet);
    if (target && complete(entry, *target)) {
      ready.push_back(Ready{key, std::move(entry)});
      table_.erase(it);
    }
  }
}

bool NamedOperations::complete(const Entry& entry, const ProcessSet& target) const {
  const Signature* any = nullptr;
  for (const auto& s : entry.byRank)
    if (s) any = &*s;
  for (int r : target.ranks) {
    const auto& s = entry.byRank[static_cast<std::size_t>(r)];
    const bool standsIn =
        joined_[static_cast<std::size_t>(r)] && any && any->kind != OperationKind::kJoin;
    if (!s && !standsIn) return false;
  }
  return true;
}

// Operations that the ranks that joined this cycle completed, in the table's order.
void NamedOperations::collectReady(std::vector<Ready>& ready) {
  if (std::none_of(joined_.begin(), joined_.end(), [](bool j) { return j; })) return;
  std::vector<std::map<std::string, Entry>::iterator> done;
  for (auto it = table_.begin(); it != table_.end(); ++it) {
    const Signature* any = nullptr;
    for (const auto& s : it->second.byRank)
      if (s) any = &*s;
    const std::shared_ptr<ProcessSet> target = any ? set(any->processSet) : nullptr;
    if (target && complete(it->second, *target)) done.push_back(it);
  }
  std::sort(done.begin(), done.end(),
            [](auto a, auto b) { return a->second.order < b->second.order; });
  for (auto it : done) {
    ready.push_back(Ready{it->first, std::move(it->second)});
    table_.erase(it);
  }
}

void NamedOperations::checkStalls() {
  if (stallTimeoutSeconds_ <= 0) return;
  const auto now = Clock::now();
  for (const auto& [key, entry] : table_) {
    if (std::chrono::duration<double>(now - entry.seen).count() < stallTimeoutSeconds_) continue;
    const Signature* any = nullptr;
    std::string have, missing;
    for (int r = 0; r < size_; ++r) {
      if (entry.byRank[static_cast<std::size_t>(r)]) {
        any = &*entry.byRank[static_cast<std::size_t>(r)];
        have += (have.empty() ? "" : ", ") + std::to_string(r);
      }
    }
    const std::shared_ptr<ProcessSet> target = set(any->processSet);
    for (int r : target ? target->ranks : std::vector<int>{})
      if (!entry.byRank[static_cast<std::size_t>(r)] && !joined_[static_cast<std::size_t>(r)])
        missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    std::ostringstream text;
    text << "stall: " << kindName(any->kind) << " '" << any->name << "' was submitted by rank(s) "
         << have << " and has waited " << stallTimeoutSeconds_ << " s for rank(s) " << missing
         << " (RINGTRAIN_STALL_TIMEOUT); the job ends";
    collectives::abortJob(text.str());
  }
}

}  // namespace ringtrain::api
