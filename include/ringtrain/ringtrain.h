// ringtrain's public interface: data-parallel training for a model ringtrain does not know, in
// the manner of Horovod. Every process (rank) holds the whole model; start() joins the job that
// mpirun started, the collectives move plain buffers, and a GradientExchange averages the
// gradients of the caller's own parameters while backward still runs.
//
//   ringtrain::start();
//   ringtrain::broadcast(weights, n, ringtrain::DataType::kFloat32, 0);   // equal replicas
//   ringtrain::GradientExchange exchange;
//   int w = exchange.addParameter("w", n);           // in backward's order
//   for (...) {
//     backward(...);  exchange.gradientReady(w, grad);   // as each gradient is final
//     exchange.wait();                               // grad now holds the average over ranks
//     update(weights, grad);
//   }
//   ringtrain::shutdown();
//
// Every call is collective unless it says otherwise: all ranks make the same calls in the same
// order with the same counts, types and roots. Bad use (a call before start(), ranks that
// disagree) throws ringtrain::Error with one line that says what and, for a disagreement, names
// both ranks; a disagreement is reported on every rank, never left to hang. The settings come
// from Options and from the RINGTRAIN_* variables of `ringtrain train` (docs/api.md).
//
// This header includes only the C++ standard library: ringtrain's internals stay behind it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace ringtrain {

// The one exception type of this interface.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
// A bad argument of one call on one rank (a name already in flight, bad splits or root): thrown
// at once by that call, on that rank only; nothing was sent.
class InvalidArgument : public Error {
 public:
  using Error::Error;
};

// kBool holds one byte per element, 0 or 1.
enum class DataType {
  kFloat32,
  kFloat64,
  kFloat16,
  kBFloat16,
  kInt32,
  kInt64,
  kUInt8,
  kInt8,
  kInt16,
  kBool
};
// kAverage: the sum divided by size() (integers truncate toward zero). On kBool, kSum and kMax
// are "or", kMin and kProduct "and".
enum class ReduceOp { kSum, kAverage, kMin, kMax, kProduct };

// How gradients are averaged (`ringtrain train --backend`). kAuto, as `train` has it: kShm where
// several ranks all share one node (kTuned for an exchange that compresses: kShm has no wire),
// kTuned otherwise. The
// collectives above run on the exchange backend's own host communicator (kShm's: the ring).
enum class Backend { kAuto, kMpi, kRing, kTuned, kHierarchical, kShm };
// How gradient buckets cross the wire (`--compression`): as float32, or in 16 bits.
enum class Compression { kNone, kFloat16, kBFloat16 };

struct Options {
  Backend backend = Backend::kAuto;
  Compression compression = Compression::kNone;
  std::size_t fusionThresholdBytes = std::size_t{8} << 20;  // largest gradient bucket
  bool overlap = true;                                      // average buckets while backward runs
  std::string tuningFile;            // kTuned: allreduce_perf --autotune's table ("": built-in)
  double stallTimeoutSeconds = 300;  // end the job, naming the missing ranks (0: never)
  // Read RINGTRAIN_BACKEND, RINGTRAIN_COMPRESSION, RINGTRAIN_FUSION_THRESHOLD,
  // RINGTRAIN_OVERLAP, RINGTRAIN_TUNING_FILE and RINGTRAIN_STALL_TIMEOUT over the fields above.
  bool readEnvironment = true;
};

// Joins the job: initialises MPI (with MPI_THREAD_MULTIPLE), or adopts an MPI the caller
// initialised (then shutdown() leaves it to the caller to finalise). Throws Error for a bad
// setting (naming the variable or field) or an MPI without thread support; a second start()
// before shutdown() is an Error too.
void start(const Options& options = {});
// Stops the engine's threads, closes every GradientExchange still open, and finalises MPI if
// start() initialised it. Harmless when not started. Called at exit if the program does not.
void shutdown();
bool started();

// This process's place in the job (not collective).
int rank();
int size();
int localRank();  // among the ranks on this node
int localSize();

// In place: data[i] = op over ranks of data[i], identical to the bit on every rank.
void allreduce(void* data, std::size_t count, DataType type, ReduceOp op = ReduceOp::kAverage);
// root's `count` elements into every rank's `data`.
void broadcast(void* data, std::size_t count, DataType type, int root);
// recv holds size() * countPerRank elements; rank r's block lands at r * countPerRank.
void allgather(const void* send, void* recv, std::size_t countPerRank, DataType type);
void barrier();

// Point to point, not collective: `bytes` bytes to rank `destination`, or from rank `source`,
// under `tag` (0 to at least 32767). Both return a handle at once; waitTransfer(handle) returns
// once the transfer is done (a send's buffer may be reused; a receive's holds the message) and
// throws Error for a message of another length. Messages from one rank to another under one tag
// arrive in the order sent (MPI's rule); they never meet the collectives' (a communicator of
// their own). InvalidArgument for a rank or tag out of range.
std::int64_t startSend(const void* data, std::size_t bytes, int destination, int tag);
std::int64_t startReceive(void* data, std::size_t bytes, int source, int tag);
void waitTransfer(std::int64_t handle);

// Named operations, Horovod's model: each rank submits an operation under a name and goes on; a
// thread of the engine matches the ranks' submissions by name (they may come in any order),
// checks that they agree, runs each once every rank of its process set has submitted it (the
// all-reduces ready together fused into one), and completes the handles. Ranks that disagree (type,
// shape, op, root) get an Error from wait() on every rank. An operation that some ranks never
// submit ends the job after the stall time-out, naming them.
enum class OperationKind {
  kAllreduce,
  kAllgather,
  kBroadcast,
  kAlltoall,
  kReducescatter,
  kBarrier,
  kJoin
};

struct Operation {
  OperationKind kind = OperationKind::kAllreduce;
  std::string name;  // unique among this rank's operations in flight
  DataType type = DataType::kFloat32;
  std::vector<std::int64_t> shape;  // the input's, row-major; rows are dimension 0
  const void* input = nullptr;      // kept alive and unchanged until wait() returns
  // kAllreduce and kBroadcast: shape's elements (may be input). The others leave their result in
  // OperationResult.
  void* output = nullptr;
  ReduceOp op = ReduceOp::kAverage;    // kAllreduce, kReducescatter
  double prescale = 1, postscale = 1;  // kAllreduce, kReducescatter: each input, and the result
  int root = 0;                        // kBroadcast: a rank (of the world) in the process set
  std::vector<std::int64_t> splits;    // kAlltoall: rows to each rank of the set (empty: equal)
  int processSet = 0;                  // 0: every rank; others from addProcessSet
  // Where input and output lie: -1, host memory; otherwise the CUDA device of that index, and the
  // operation runs with NCCL over the set's ranks (a build with the GPU path, ncclVersion() > 0;
  // one GPU per rank; every operation of a set on the same device on each rank). Ranks of one
  // operation must agree on host or device (an Error on every rank, naming both, otherwise).
  int device = -1;
  // device >= 0: a cudaEvent_t, as an integer, recorded on the stream that writes the input, after
  // it (0: the input is ready). NCCL's stream waits for it on the device; the host does not.
  std::uintptr_t readyEvent = 0;
};

// The memory of a result's elements: handed out unzeroed (the collective writes every byte), and
// where it is large, on the huge pages the OS lends on request, so that a fresh result of many
// megabytes costs a few page faults rather than one per 4 KiB.
namespace detail {
void* allocateResultBytes(std::size_t bytes);
void freeResultBytes(void* data, std::size_t bytes) noexcept;
}  // namespace detail

template <class T>
struct ResultAllocator {
  using value_type = T;
  ResultAllocator() = default;
  template <class U>
  ResultAllocator(const ResultAllocator<U>&) noexcept {}
  T* allocate(std::size_t n) { return static_cast<T*>(detail::allocateResultBytes(n * sizeof(T))); }
  void deallocate(T* p, std::size_t n) noexcept { detail::freeResultBytes(p, n * sizeof(T)); }
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;  // default-initialised: left as it is
  }
  template <class U>
  bool operator==(const ResultAllocator<U>&) const noexcept {
    return true;
  }
};
using ResultBytes = std::vector<unsigned char, ResultAllocator<unsigned char>>;

struct OperationResult {
  std::vector<std::int64_t> shape;           // kAllgather, kAlltoall, kReducescatter: the result's
  ResultBytes data;                          // ... and its elements
  std::vector<std::int64_t> receivedSplits;  // kAlltoall: rows from each rank of the set
  int lastJoined = -1;                       // kJoin: the rank that joined last
  // A device operation's result (shape's elements) lies here instead of in `data`: memory of the
  // operation's CUDA device, finished writing when wait() returns, freed with the last copy of
  // this pointer (null for an empty result).
  std::shared_ptr<void> deviceData;
};

// Not collective. Throws InvalidArgument for a bad argument (a device operation in a build without
// the GPU path, or of a type NCCL lacks: int16), Error before start().
std::int64_t submit(const Operation& operation);
// Not collective, needs no start(): NCCL's version code (22809 for 2.28.9) where this build has the
// GPU path of the named operations, 0 where it has none.
int ncclVersion();
// Not collective: whether wait() would return at once.
bool poll(std::int64_t handle);
// The operation's result, once it is done; throws Error if it failed. The handle is then spent.
OperationResult wait(std::int64_t handle);
// Collective over every rank: a process set of `ranks` (sorted, distinct, of the world) and its
// id. Operations of a set run on its ranks alone.
int addProcessSet(const std::vector<int>& ranks);
// Collective over every rank; no operation of the set may be in flight.
void removeProcessSet(int id);
std::vector<int> processSetRanks(int id);  // not collective; Error for an unknown id
std::vector<int> processSetIds();          // not collective; 0 first
// Collective: records every named operation's run (name, kind, bytes, start and end on each
// rank) until stopTimeline(), which writes one Chrome trace of every rank to `path` from rank 0
// (engine::Timeline, as `ringtrain train --timeline` writes). InvalidArgument if one is open.
void startTimeline(const std::string& path);
void stopTimeline();  // collective; nothing when none is open

// Averages (or sums) the gradients of the caller's parameters over the ranks, bucket by bucket,
// while backward still computes the earlier layers' gradients (the engine's buckets:
// docs/design.md).
//
// Register each parameter once, in the order backward finishes them (the last layer first). Then
// each step: gradientReady for every parameter as backward finishes it, then wait(). Every rank
// registers the same parameters and announces them in the same order. The first gradientReady
// fixes the parameters; ranks that registered different ones get an Error naming both.
class GradientExchange {
 public:
  GradientExchange();  // needs start(); the compression of start()'s options
  explicit GradientExchange(Compression compression);  // this exchange's own compression
  // kAverage (the others' default) or kSum: wait() leaves the sum over the ranks, summed as the
  // average is, without the division. kMin and kMax throw Error.
  GradientExchange(Compression compression, ReduceOp op);
  ~GradientExchange();
  GradientExchange(const GradientExchange&) = delete;
  GradientExchange& operator=(const GradientExchange&) = delete;

  // Not collective. Returns the parameter's index (0, 1, ... in call order).
  int addParameter(const std::string& name, std::size_t count);
  // `gradient` (float32, count elements) is final for this step: its bucket may go out now. The
  // average is written back into `gradient` by wait(); keep it alive and untouched until then.
  // Copied into the engine's buffer, unless it is gradientBuffer(parameter) itself.
  void gradientReady(int parameter, float* gradient);
  // The engine's own place for the parameter's gradient (its count of float32): a caller that
  // computes the gradient there, and passes this address to gradientReady, saves a copy of it
  // each step. Write it only between wait() and gradientReady(parameter). Valid until shutdown()
  // or this exchange's end. The first call fixes the parameters and is collective, as the first
  // gradientReady is.
  float* gradientBuffer(int parameter);
  // Returns when every announced gradient holds the average over the ranks. A parameter not
  // announced this step counts as a zero gradient (its average is not written anywhere).
  void wait();

  int parameterCount() const;
  // Not collective: the count addParameter gave the parameter.
  std::size_t parameterSize(int parameter) const;
  // One line per bucket: which parameters travel together.
  std::string describeBuckets() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ringtrain
