// Where `ringtrain train` runs: --device auto|cpu|cuda and --backend auto, settled before the
// trainer is built, the same way on every rank.
//
// cuda means one GPU per rank: NCCL refuses two ranks on one GPU, so a node needs at least as
// many visible GPUs as it has ranks. auto takes cuda only when the build has the GPU path and
// every node fits (all ranks agree on that over MPI first); otherwise cpu, and the choice says
// why. --backend auto is nccl on cuda; on cpu shm where every rank shares one node (and no
// compression asks for messages), ring otherwise.
#pragma once

#include <string>
#include <variant>

#include "collectives/environment.h"
#include "training/config.h"

namespace ringtrain::training {

// What the choice depends on beside the options.
struct DeviceFacts {
  bool gpuPathBuilt = false;   // this build can train on GPUs (gpuTrainingBuilt())
  int localRanks = 1;          // ranks on this rank's node
  int visibleGpus = 0;         // GPUs this rank sees
  std::string noGpuReason;     // why visibleGpus is 0
  bool everyNodeFits = true;   // on every node: GPU path, and ranks <= visible GPUs
  int nodes = 1;               // nodes the job's ranks are on
  int ranks = 1;               // ranks in the job
  bool bf16Everywhere = true;  // every rank's CPU has AVX512-BF16 (--precision bf16)
  // Several ranks, all on one node: the host backend can be shm.
  bool sharedNode() const { return ranks > 1 && nodes == 1; }
};

struct DeviceChoice {
  Device device = Device::kCpu;  // kCpu or kCuda
  engine::ExchangeBackend backend = engine::ExchangeBackend::kRing;
  std::string reason;  // why, for the start-up line ("" when the options said so)
};

// True when this rank's node can give each of its ranks a GPU of its own.
bool nodeFitsOnGpus(const DeviceFacts& facts);

// The device and backend for `config` (validated), or the one-line error naming the option.
std::variant<DeviceChoice, std::string> chooseDevice(const TrainConfig& config,
                                                     const DeviceFacts& facts);

// The gradients' backend of a configuration whose --backend chooseDevice has settled (auto
// still unsettled counts as nccl on cuda, ring otherwise).
engine::ExchangeBackend gradientBackend(const TrainConfig& config);

// Collective over the world: gathers this rank's facts (counting GPUs only when the options may
// use them) and whether every node fits.
DeviceFacts deviceFacts(const TrainConfig& config, const collectives::MpiEnvironment& env);

}  // namespace ringtrain::training
