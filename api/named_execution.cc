// NamedOperations' running of ready operations: every rank of a set runs the same ones in the
// same order; what each moves follows from the signatures every rank has seen.
#include <algorithm>
#include <climits>
#include <cstring>
#include <numeric>

#include "api/element_math.h"
#include "api/named_operations.h"
#include "base/steady_clock.h"
#include "collectives/mpi_check.h"

namespace ringtrain::api {

std::int64_t rowElements(const std::vector<std::int64_t>& shape) {
  return shape.empty() ? 1 : elements({shape.begin() + 1, shape.end()});
}

RowBlock rowBlock(std::int64_t rows, std::int64_t n, std::int64_t index) {
  const std::int64_t base = rows / n, extra = rows % n;
  return {index * base + std::min(index, extra), base + (index < extra ? 1 : 0)};
}

std::vector<std::int64_t> rowSplits(const Signature& s, std::size_t n) {
  if (!s.splits.empty()) return s.splits;
  return std::vector<std::int64_t>(n, s.shape[0] / static_cast<std::int64_t>(n));
}

namespace {

std::string describe(const Signature& s) {
  std::string text = typeName(s.type) + " " + shapeText(s.shape);
  if (s.kind == OperationKind::kAllreduce || s.kind == OperationKind::kReducescatter)
    text += " " + opName(s.op);
  if (s.kind == OperationKind::kBroadcast) text += " from root " + std::to_string(s.root);
  if (s.prescale != 1 || s.postscale != 1)
    text += " scaled " + std::to_string(s.prescale) + "/" + std::to_string(s.postscale);
  return std::string(kindName(s.kind)) + " of " + text;
}

const char* placeName(const Signature& s) {
  return s.device >= 0 ? "on the GPU" : "on the CPU";
}

// Whether two ranks' signatures of one operation agree (dimension 0 may differ where the kind
// lets it; each rank has its own GPU, so only host or device must agree).
bool agree(const Signature& a, const Signature& b) {
  if (a.kind != b.kind || a.type != b.type || (a.device >= 0) != (b.device >= 0)) return false;
  switch (a.kind) {
    case OperationKind::kAllreduce:
    case OperationKind::kReducescatter:
      return a.shape == b.shape && a.op == b.op && a.prescale == b.prescale &&
             a.postscale == b.postscale;
    case OperationKind::kBroadcast:
      return a.shape == b.shape && a.root == b.root;
    case OperationKind::kAllgather:
    case OperationKind::kAlltoall:
      return a.shape.size() == b.shape.size() && !a.shape.empty() &&
             std::equal(a.shape.begin() + 1, a.shape.end(), b.shape.begin() + 1);
    default:
      return true;
  }
}

int bytesInt(std::int64_t bytes) {
  if (bytes > INT_MAX) throw Error("ringtrain: more than 2 GiB moved in one operation");
  return static_cast<int>(bytes);
}

// Prefix sums of `counts`, for MPI's v-collectives.
std::vector<int> offsetsOf(const std::vector<int>& counts) {
  std::vector<int> offsets(counts.size(), 0);
  for (std::size_t i = 1; i < counts.size(); ++i)
    offsets[i] = offsets[i - 1] + counts[i - 1];
  return offsets;
}

}  // namespace

std::string NamedOperations::disagreement(const Entry& entry, const ProcessSet& target) const {
  const Signature* first = nullptr;
  int firstRank = -1;
  for (int r : target.ranks) {
    const auto& s = entry.byRank[static_cast<std::size_t>(r)];
    if (!s) {
      if (first && first->kind != OperationKind::kAllreduce) break;
      continue;
    }
    if (!first) {
      first = &*s, firstRank = r;
    } else if (!agree(*first, *s)) {
      const bool places = (first->device >= 0) != (s->device >= 0);
      return "ringtrain: '" + s->name + "': rank " + std::to_string(firstRank) + " has " +
             describe(*first) + (places ? std::string(" ") + placeName(*first) : "") +
             " where rank " + std::to_string(r) + " has " + describe(*s) +
             (places ? std::string(" ") + placeName(*s) : "");
    }
  }
  for (int r : target.ranks) {
    if (entry.byRank[static_cast<std::size_t>(r)]) continue;
    if (first->kind != OperationKind::kAllreduce) {
      return std::string("ringtrain: ") + kindName(first->kind) + " '" + first->name + "': rank " +
             std::to_string(r) + " has joined, and join() stands in for all-reduces only";
    }
    if (first->device >= 0) {
      return std::string("ringtrain: allreduce '") + first->name + "': rank " + std::to_string(r) +
             " has joined, and join() stands in for all-reduces of host memory only (this one is "
             "on the GPU)";
    }
  }
  return {};
}

NamedOperations::Item NamedOperations::itemOf(Ready& ready) {
  Item item{&ready, nullptr, nullptr};
  for (const auto& s : ready.entry.byRank)
    if (s && !item.agreed) item.agreed = &*s;
  std::lock_guard lock(mutex_);
  auto it = inFlight_.find(ready.key);
  if (it != inFlight_.end()) item.slot = &slots_.at(it->second);
  return item;
}

namespace {

// An all-reduce the engine runs itself, which can share one buffer with others.
bool isFusable(const Signature& s) {
  return s.kind == OperationKind::kAllreduce && s.device < 0 && engineType(s.type) &&
         engineOp(s.op);
}

std::size_t bytesOf(const Signature& s) {
  return static_cast<std::size_t>(elements(s.shape)) * sizeOf(s.type);
}

}  // namespace

// A join's end: every rank has joined; each learns the last to.
void NamedOperations::finishJoin(const std::string& key) {
  OperationResult result;
  result.lastJoined = lastJoined_;
  std::fill(joined_.begin(), joined_.end(), false);
  lastJoined_ = -1;
  finish(key, {}, std::move(result));
}

// ready[i] and the all-reduces right after it that go in one buffer with it: the same set, type,
// op and scaling, agreed by the ranks, within the fusion threshold. `bytes`: their size.
std::vector<NamedOperations::Item> NamedOperations::fusedFrom(std::vector<Ready>& ready,
                                                              std::size_t i,
                                                              const ProcessSet& target,
                                                              std::size_t& bytes) {
  std::vector<Item> fused{itemOf(ready[i])};
  const Signature& a = *fused.front().agreed;
  bytes = bytesOf(a);
  for (std::size_t next = i + 1; isFusable(a) && next < ready.size(); ++next) {
    Item more = itemOf(ready[next]);
    const Signature& b = *more.agreed;
    if (!isFusable(b) || b.processSet != a.processSet || b.type != a.type || b.op != a.op ||
        b.prescale != a.prescale || b.postscale != a.postscale ||
        bytes + bytesOf(b) > runtime_.exchangeOptions.fusionThresholdBytes ||
        !disagreement(ready[next].entry, target).empty()) {
      break;
    }
    fused.push_back(more);
    bytes += bytesOf(b);
  }
  return fused;
}

void NamedOperations::execute(std::vector<Ready>& ready) {
  for (std::size_t i = 0; i < ready.size();) {
    Item item = itemOf(ready[i]);
    const std::shared_ptr<ProcessSet> target = set(item.agreed->processSet);
    if (!target || target->index < 0) {
      ++i;
      continue;
    }
    const std::string error = disagreement(ready[i].entry, *target);
    if (!error.empty()) {
      finish(ready[i].key, error);
      ++i;
      continue;
    }
    if (item.agreed->kind == OperationKind::kJoin) {
      finishJoin(ready[i].key);
      ++i;
      continue;
    }
    std::size_t bytes = 0;
    const std::vector<Item> fused = fusedFrom(ready, i, *target, bytes);
    const bool fusable = isFusable(*item.agreed);
    const std::size_t next = i + fused.size();
    std::string failure;
    OperationResult result;
    const std::int64_t startNs = steadyNowNs();
    try {
      if (fusable) {
        runAllreduces(fused, *target);
      } else if (item.agreed->device >= 0 && item.agreed->kind != OperationKind::kBarrier) {
        result = runOnDevice(item, *target);
      } else {
        result = runOne(item, *target);
      }
    } catch (const Error& e) {  // a limit of this rank's: the others fail in MPI or do the same
      failure = e.what();
    }
    trace(*item.agreed, startNs, bytes);
    for (std::size_t k = i; k < next; ++k)
      finish(ready[k].key, failure, k == i ? std::move(result) : OperationResult{});
    i = next;
  }
}

OperationResult NamedOperations::runOne(const Item& item, ProcessSet& target) {
  switch (item.agreed->kind) {
    case OperationKind::kAllreduce:
      return runGathered(item, target), OperationResult{};
    case OperationKind::kAllgather:
      return runAllgather(item, target);
    case OperationKind::kBroadcast:
      return runBroadcast(item, target);
    case OperationKind::kAlltoall:
      return runAlltoall(item, target);
    case OperationKind::kReducescatter:
      return runReducescatter(item, target);
    default:
      return {};  // a barrier: every rank has reached it
  }
}

// One engine all-reduce over the items' elements, each scaled before and after.
void NamedOperations::runAllreduces(const std::vector<Item>& items, ProcessSet& target) {
  const Signature& a = *items.front().agreed;
  const std::size_t unit = sizeOf(a.type);
  std::size_t total = 0;
  for (const Item& item : items)
    total += static_cast<std::size_t>(elements(item.agreed->shape));
  const Operation* only = items.size() == 1 && items[0].slot ? &items[0].slot->operation : nullptr;
  unsigned char* buffer = nullptr;
  const bool inOutput = only && only->output;
  if (inOutput) {  // in the caller's output, saving two copies
    buffer = static_cast<unsigned char*>(only->output);
    if (only->input != only->output && total > 0) std::memcpy(buffer, only->input, total * unit);
  } else {
    if (scratch_.size() < total * unit) scratch_.resize(total * unit);
    buffer = scratch_.data();
    std::size_t at = 0;
    for (const Item& item : items) {
      const std::size_t n = static_cast<std::size_t>(elements(item.agreed->shape)) * unit;
      if (item.slot && n > 0) {
        std::memcpy(buffer + at, item.slot->operation.input, n);
      } else if (n > 0) {
        std::memset(buffer + at, 0, n);  // a joined rank's zeros
      }
      at += n;
    }
  }
  scale(buffer, total, a.type, a.prescale);
  target.engine->allreduce(buffer, buffer, total, *engineType(a.type), *engineOp(a.op));
  scale(buffer, total, a.type, a.postscale);
  if (inOutput) return;
  std::size_t at = 0;
  for (const Item& item : items) {
    const std::size_t n = static_cast<std::size_t>(elements(item.agreed->shape)) * unit;
    if (item.slot && n > 0) std::memcpy(item.slot->operation.output, buffer + at, n);
    at += n;
  }
}

// An all-reduce of a type or op the engine lacks: every rank's block, reduced in rank order.
void NamedOperations::runGathered(const Item& item, ProcessSet& target) {
  const Signature& s = *item.agreed;
  const std::size_t count = static_cast<std::size_t>(elements(s.shape));
  const std::size_t bytes = count * sizeOf(s.type);
  std::vector<unsigned char> mine(bytes, 0), all(bytes * target.ranks.size());
  if (item.slot && bytes > 0) std::memcpy(mine.data(), item.slot->operation.input, bytes);
  scale(mine.data(), count, s.type, s.prescale);
  MPI_Request request = MPI_REQUEST_NULL;
  RINGTRAIN_MPI_CHECK(
      MPI_Iallgather(mine.data(), bytesInt(static_cast<std::int64_t>(bytes)), MPI_BYTE, all.data(),
                     bytesInt(static_cast<std::int64_t>(bytes)), MPI_BYTE, target.comm, &request));
  waitPolitely(request);
  if (!item.slot) return;
  void* out = item.slot->operation.output;
  reduceBlocks(all.data(), static_cast<int>(target.ranks.size()), count, s.type, s.op, out);
  scale(out, count, s.type, s.postscale);
}

OperationResult NamedOperations::runAllgather(const Item& item, ProcessSet& target) {
  const Signature& s = *item.agreed;
  const std::int64_t rowBytes = rowElements(s.shape) * static_cast<std::int64_t>(sizeOf(s.type));
  std::vector<int> counts;
  std::int64_t rows = 0;
  for (int r : target.ranks) {
    const std::int64_t theirs = item.ready->entry.byRank[static_cast<std::size_t>(r)]->shape[0];
    counts.push_back(bytesInt(theirs * rowBytes));
    rows += theirs;
  }
  OperationResult result;
  result.shape = s.shape;
  result.shape[0] = rows;
  result.data.resize(static_cast<std::size_t>(rows * rowBytes));
  const std::vector<int> offsets = offsetsOf(counts);
  MPI_Request request = MPI_REQUEST_NULL;
  RINGTRAIN_MPI_CHECK(MPI_Iallgatherv(
      item.slot->operation.input, counts[static_cast<std::size_t>(target.index)], MPI_BYTE,
      result.data.data(), counts.data(), offsets.data(), MPI_BYTE, target.comm, &request));
  waitPolitely(request);
  return result;
}

OperationResult NamedOperations::runBroadcast(const Item& item, ProcessSet& target) {
  const Signature& s = *item.agreed;
  const Operation& op = item.slot->operation;
  const std::int64_t bytes = elements(s.shape) * static_cast<std::int64_t>(sizeOf(s.type));
  const int root = static_cast<int>(std::find(target.ranks.begin(), target.ranks.end(), s.root) -
                                    target.ranks.begin());
  if (root == target.index && op.input != op.output && bytes > 0)
    std::memcpy(op.output, op.input, static_cast<std::size_t>(bytes));
  MPI_Request request = MPI_REQUEST_NULL;
  RINGTRAIN_MPI_CHECK(
      MPI_Ibcast(op.output, bytesInt(bytes), MPI_BYTE, root, target.comm, &request));
  waitPolitely(request);
  return {};
}

OperationResult NamedOperations::runAlltoall(const Item& item, ProcessSet& target) {
  const Signature& s = *item.agreed;
  const std::size_t n = target.ranks.size();
  const std::int64_t rowBytes = rowElements(s.shape) * static_cast<std::int64_t>(sizeOf(s.type));
  auto splitsOf = [&](int worldRank) {
    return rowSplits(*item.ready->entry.byRank[static_cast<std::size_t>(worldRank)], n);
  };
  const std::vector<std::int64_t> mine =
      splitsOf(target.ranks[static_cast<std::size_t>(target.index)]);
  std::vector<int> sendCounts, receiveCounts;
  OperationResult result;
  for (std::size_t j = 0; j < n; ++j) {
    sendCounts.push_back(bytesInt(mine[j] * rowBytes));
    const std::int64_t rows = splitsOf(target.ranks[j])[static_cast<std::size_t>(target.index)];
    receiveCounts.push_back(bytesInt(rows * rowBytes));
    result.receivedSplits.push_back(rows);
  }
  result.shape = s.shape;
  result.shape[0] =
      std::accumulate(result.receivedSplits.begin(), result.receivedSplits.end(), std::int64_t{0});
  result.data.resize(static_cast<std::size_t>(result.shape[0] * rowBytes));
  const std::vector<int> sendOffsets = offsetsOf(sendCounts),
                         receiveOffsets = offsetsOf(receiveCounts);
  MPI_Request request = MPI_REQUEST_NULL;
  RINGTRAIN_MPI_CHECK(MPI_Ialltoallv(item.slot->operation.input, sendCounts.data(),
                                     sendOffsets.data(), MPI_BYTE, result.data.data(),
                                     receiveCounts.data(), receiveOffsets.data(), MPI_BYTE,
                                     target.comm, &request));
  waitPolitely(request);
  return result;
}

// Whether the engine's reduce-scatter can serve Horovod's cut of `s`: its shards (every rank's,
// known to every rank, so all decide alike) must hold as many elements as the rank's rows.
bool NamedOperations::enginesCutFits(const Signature& s, ProcessSet& target) const {
  const std::size_t count = static_cast<std::size_t>(elements(s.shape));
  if (count == 0 || !target.engine->splitsAllreduce() || !engineType(s.type) || !engineOp(s.op))
    return false;
  const auto n = static_cast<std::int64_t>(target.ranks.size());
  for (std::int64_t r = 0; r < n; ++r) {
    const collectives::ElementRange shard =
        target.engine->shardOfRank(count, *engineType(s.type), static_cast<int>(r));
    if (static_cast<std::int64_t>(shard.end - shard.begin) !=
        rowBlock(s.shape[0], n, r).count * rowElements(s.shape))
      return false;
  }
  return true;
}

// Horovod's reduce-scatter: the reduction cut along dimension 0 (rowBlock). Where the engine's
// cut fits, rank r's rows go where the engine leaves rank r's shard and its reduce-scatter runs
// (half the bytes of an all-reduce); otherwise the whole all-reduce runs and each rank keeps its
// rows. Either way in the scratch buffer kept from cycle to cycle (no fresh pages).
OperationResult NamedOperations::runReducescatter(const Item& item, ProcessSet& target) {
  const Signature& s = *item.agreed;
  const auto n = static_cast<std::int64_t>(target.ranks.size());
  const std::size_t count = static_cast<std::size_t>(elements(s.shape));
  const std::size_t unit = sizeOf(s.type);
  const std::size_t rowBytes = static_cast<std::size_t>(rowElements(s.shape)) * unit;
  if (scratch_.size() < count * unit) scratch_.resize(count * unit);
  const RowBlock mine = rowBlock(s.shape[0], n, target.index);
  std::size_t resultAt = static_cast<std::size_t>(mine.first) * rowBytes;
  if (enginesCutFits(s, target)) {
    const collectives::DataType type = *engineType(s.type);
    const auto* input = static_cast<const unsigned char*>(item.slot->operation.input);
    for (std::int64_t r = 0; r < n; ++r) {
      const RowBlock block = rowBlock(s.shape[0], n, r);
      std::memcpy(scratch_.data() +
                      target.engine->shardOfRank(count, type, static_cast<int>(r)).begin * unit,
                  input + static_cast<std::size_t>(block.first) * rowBytes,
                  static_cast<std::size_t>(block.count) * rowBytes);
    }
    scale(scratch_.data(), count, s.type, s.prescale);
    target.engine->reduceScatter(scratch_.data(), scratch_.data(), count, type, *engineOp(s.op));
    resultAt = target.engine->shardOfRank(count, type, target.index).begin * unit;
    scale(scratch_.data() + resultAt, static_cast<std::size_t>(mine.count) * rowBytes / unit,
          s.type, s.postscale);
  } else {
    Operation reduced = item.slot->operation;
    reduced.output = scratch_.data();
    Slot stand{reduced, {}, false, {}, {}};
    Item asAllreduce{item.ready, &stand, item.agreed};
    if (engineType(s.type) && engineOp(s.op)) {
      runAllreduces({asAllreduce}, target);
    } else {
      runGathered(asAllreduce, target);
    }
  }
  OperationResult result;
  result.shape = s.shape;
  result.shape[0] = mine.count;
  const auto begin = scratch_.begin() + static_cast<std::ptrdiff_t>(resultAt);
  result.data.assign(
      begin, begin + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(mine.count) * rowBytes));
  return result;
}

}  // namespace ringtrain::api
