// allreduce_perf's measurement, as nccl-tests' harness: each rank's inputs and the exact results
// they must give, the collective under test, the buffers, and timing and checking the calls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "collectives/aligned_buffer.h"
#include "collectives/communicator.h"
#include "src/bench/allreduce_perf_options.h"
#include "src/bench/bench_device.h"

namespace ringtrain::allreduce_perf {

using collectives::AlignedBuffer;
using collectives::Communicator;

// One period of a rank's input and of the result (allreduce_perf_harness.cc says how they are
// made).
struct Patterns {
  std::vector<std::byte> input;     // this rank's input, one period
  std::vector<std::byte> expected;  // the reduction's result, one period
};

// What the harness below needs to know of a collective, as nccl-tests' struct testColl: its
// name, its data, its bus bandwidth, how to call it and how to check what a call left.
struct Collective {
  const char* name;
  // This rank's input and the exact result it must get back, one period of each.
  Patterns (*patterns)(DataType type, ReduceOp op, int rank, int ranks);
  // busbw from algbw on `ranks` ranks: the bandwidth each rank's link must carry.
  double (*busBandwidth)(double algbw, int ranks);
  // One call; send == recv is in place.
  void (*run)(Communicator& comm, const std::byte* send, std::byte* recv, std::size_t count,
              DataType type, ReduceOp op);
  // This rank's wrong values in `result` (`count` elements of `elementSize` bytes). Every rank
  // calls it at once: it may communicate.
  std::uint64_t (*check)(const std::byte* result, std::size_t count, const Patterns& patterns,
                         std::size_t elementSize);
};

// The all-reduce: busbw = algbw * 2(n-1)/n, each rank sends and receives 2(n-1)/n of the buffer.
extern const Collective kAllReduce;

struct Measurement {
  double timeUs = 0;
  double algbw = 0;         // GB/s
  double busbw = 0;         // GB/s
  std::int64_t wrong = -1;  // summed over the ranks; -1: not checked (-c 0), as nccl-tests prints
};

// Seconds per call on one rank, combined over the ranks: 0 rank 0's, 1 the average, 2 the
// minimum, 3 the maximum (--average).
double combineTime(double seconds, int mode);

// The benchmark's two buffers: host memory, or device memory with host copies where the inputs
// are written and the results checked.
class Buffers {
 public:
  Buffers(std::size_t bytes, bool onDevice) {
    host_[0].resize(bytes);
    host_[1].resize(bytes);
    if (onDevice) {
      device_[0] = std::make_unique<bench::DeviceBytes>(bytes);
      device_[1] = std::make_unique<bench::DeviceBytes>(bytes);
    }
  }
  // What the communicator gets: 0 send, 1 recv.
  std::byte* data(int which) {
    return device_[which] ? device_[which]->data() : host_[which].data();
  }
  // Writes the input pattern into the send buffer.
  void fillSend(std::size_t count, const std::vector<std::byte>& pattern, std::size_t e);
  // Buffer `which`'s first `bytes` bytes in host memory (the buffer itself on the host).
  std::byte* onHost(int which, std::size_t bytes) {
    if (device_[which]) bench::copyToHost(host_[which].data(), device_[which]->data(), bytes);
    return host_[which].data();
  }

 private:
  AlignedBuffer host_[2];
  std::unique_ptr<bench::DeviceBytes> device_[2];
};

// The two buffers of `bytes` each. A rank that cannot allocate them (a memory limit, ulimit -v)
// ends the job on every rank with one line naming the size, not a bare std::bad_alloc.
std::optional<Buffers> allocateBuffers(std::size_t bytes, bool onDevice);

// What every measurement of a run shares.
struct Bench {
  const Collective& collective;
  const Options& options;
  Buffers& buffers;
  int rank;
};

// One data type and reduction of the sweep (several with -d all or -o all), with its data.
struct Case {
  DataType type;
  ReduceOp op;
  Patterns patterns;
};

// One measurement of `count` elements, out of place or in place: --iters timed calls after the
// warm-up, then --check checked calls.
Measurement measure(const Bench& bench, Communicator& comm, const Case& c, std::size_t count,
                    bool inPlace);

// Every (type, op) of -d and -o, with this rank's input and the expected result.
std::vector<Case> makeCases(const Options& o, const Collective& collective, int rank, int ranks);

// One rank's memory bandwidth (bytes/s) for c = a + b, every rank at once.
double measureMemoryBandwidth();
// The MPI library's name and version, its first line.
std::string mpiLibrary();

}  // namespace ringtrain::allreduce_perf
