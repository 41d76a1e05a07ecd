#include "src/trainer/device_choice.h"

#include <fmt/format.h>

#include "collectives/mpi_check.h"
#include "src/trainer/gpu_replica.h"

namespace ringtrain {

bool nodeFitsOnGpus(const DeviceFacts& facts) {
  return facts.gpuPathBuilt && facts.visibleGpus > 0 && facts.localRanks <= facts.visibleGpus;
}

namespace {

// Why this rank's node cannot train on GPUs ("" when it can).
std::string whyNotGpus(const DeviceFacts& facts) {
  if (!facts.gpuPathBuilt) {
    return "this build has no GPU path (configure with -DRINGTRAIN_CUDA=ON where the CUDA "
           "toolkit and NCCL are installed)";
  }
  if (facts.visibleGpus == 0) return "no GPU visible (" + facts.noGpuReason + ")";
  if (facts.localRanks > facts.visibleGpus) {
    return fmt::format(
        "{} ranks on this node but {} GPU(s) visible, and each rank needs its own (start at most "
        "{} per node: mpirun -npernode {})",
        facts.localRanks, facts.visibleGpus, facts.visibleGpus, facts.visibleGpus);
  }
  if (!facts.everyNodeFits) return "another node has fewer GPUs than ranks";
  return "";
}

}  // namespace

std::string gradientBackend(const TrainConfig& config) {
  if (config.backend != "auto") return config.backend;
  return config.device == "cuda" ? "nccl" : "ring";
}

std::string controlBackend(const TrainConfig& config) {
  // shm has no collectives of its own for the few small ones the trainer needs besides the
  // gradients (SharedGradientReducer is no communicator): the ring does those.
  const std::string gradients = gradientBackend(config);
  return config.device == "cuda" || gradients == "shm" ? "ring" : gradients;
}

namespace {

// --backend auto on the host: shared memory where every rank shares one node (no messages at
// all; measured faster than the ring there, README "Training performance"), unless compression
// asks for messages to compress; the ring otherwise.
std::string hostBackend(const TrainConfig& config, const DeviceFacts& facts) {
  if (config.backend != "auto") return config.backend;
  return facts.sharedNode() && config.compression == "none" ? "shm" : "ring";
}

}  // namespace

std::variant<DeviceChoice, std::string> chooseDevice(const TrainConfig& config,
                                                     const DeviceFacts& facts) {
  // Refused here, before any rank builds a shared window it cannot have, with the exit status
  // of every other bad option.
  if (config.backend == "shm" && facts.nodes > 1) {
    return fmt::format(
        "--backend shm needs every rank on one node, but the {} ranks are on {} nodes: use "
        "--backend ring, hierarchical or auto across nodes",
        facts.ranks, facts.nodes);
  }
  const std::string why = whyNotGpus(facts);
  if (config.device == "cpu") return DeviceChoice{"cpu", hostBackend(config, facts), ""};
  if (config.device == "cuda" || config.backend == "nccl") {
    const std::string option =
        config.device == "cuda" ? "--device cuda" : "--backend nccl (with --device auto)";
    if (!why.empty()) return option + ": " + why;
    return DeviceChoice{"cuda", "nccl", ""};
  }
  // auto: the options that only the host path has keep it on the host.
  if (config.backend != "auto") {
    return DeviceChoice{"cpu", config.backend,
                        "--backend " + config.backend + " averages host buffers"};
  }
  if (config.compression != "none") {
    return DeviceChoice{"cpu", "ring",
                        "--compression " + config.compression + " runs on the host only"};
  }
  if (!why.empty()) return DeviceChoice{"cpu", hostBackend(config, facts), why};
  return DeviceChoice{"cuda", "nccl",
                      fmt::format("{} rank(s) on this node, {} GPU(s) visible", facts.localRanks,
                                  facts.visibleGpus)};
}

DeviceFacts deviceFacts(const TrainConfig& config, const collectives::MpiEnvironment& env) {
  DeviceFacts facts;
  facts.gpuPathBuilt = gpuTrainingBuilt();
  facts.localRanks = env.localSize();
  if (facts.gpuPathBuilt && config.device != "cpu") {
    facts.visibleGpus = visibleGpus(&facts.noGpuReason);
  }
  int fits = nodeFitsOnGpus(facts) ? 1 : 0;
  RINGTRAIN_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &fits, 1, MPI_INT, MPI_MIN, env.world()));
  facts.everyNodeFits = fits == 1;
  facts.nodes = env.nodeCount();
  facts.ranks = env.worldSize();
  return facts;
}

}  // namespace ringtrain
