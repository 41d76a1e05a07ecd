#include "training/device_choice.h"

#include <fmt/format.h>

#include "collectives/mpi_check.h"
#include "models/matrix_products.h"
#include "training/gpu_replica.h"

namespace ringtrain::training {

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
        "{} per node: Open MPI's mpirun -npernode {}, MPICH's mpiexec -ppn {})",
        facts.localRanks, facts.visibleGpus, facts.visibleGpus, facts.visibleGpus,
        facts.visibleGpus);
  }
  if (!facts.everyNodeFits) return "another node has fewer GPUs than ranks";
  return "";
}

}  // namespace

engine::ExchangeBackend gradientBackend(const TrainConfig& config) {
  if (config.exchange.backend) return *config.exchange.backend;
  return config.device == Device::kCuda ? engine::ExchangeBackend::kNccl
                                        : engine::ExchangeBackend::kTuned;
}

namespace {

engine::ExchangeBackend hostBackendOf(const TrainConfig& config, const DeviceFacts& facts) {
  return config.exchange.backend.value_or(
      engine::autoHostBackend(config.exchange.compression, facts.sharedNode()));
}

}  // namespace

std::variant<DeviceChoice, std::string> chooseDevice(const TrainConfig& config,
                                                     const DeviceFacts& facts) {
  // Refused here, before any rank builds a shared window it cannot have, with the exit status
  // of every other bad option.
  if (auto problem = options::placementProblem(config.exchange.backend, facts.ranks, facts.nodes))
    return *problem;
  if (config.precision == models::Precision::kBfloat16 && !facts.bf16Everywhere) {
    return "--precision bf16 needs a CPU with AVX512-BF16 instructions, and this job's (on one "
           "rank at least) has none: use --precision fp32";
  }
  const std::string why = whyNotGpus(facts);
  constexpr auto kNccl = engine::ExchangeBackend::kNccl;
  if (config.zero > 0 && hostBackendOf(config, facts) == engine::ExchangeBackend::kShm) {
    return "--zero 1: --backend auto takes shm here (every rank on one node), which cannot shard "
           "the optimiser state: pass --backend ring";
  }
  if (config.device == Device::kCpu)
    return DeviceChoice{Device::kCpu, hostBackendOf(config, facts), ""};
  if (config.device == Device::kCuda || config.exchange.backend == kNccl) {
    const std::string option =
        config.device == Device::kCuda ? "--device cuda" : "--backend nccl (with --device auto)";
    if (!why.empty()) return option + ": " + why;
    return DeviceChoice{Device::kCuda, kNccl, ""};
  }
  // auto: the options that only the host path has keep it on the host.
  if (config.model == ModelKind::kGpt)
    return DeviceChoice{Device::kCpu, hostBackendOf(config, facts),
                        "the GPU path has no transformer layers yet"};
  if (config.zero > 0)
    return DeviceChoice{Device::kCpu, hostBackendOf(config, facts),
                        "--zero 1 runs on the host only"};
  if (config.clipGradNorm > 0)
    return DeviceChoice{Device::kCpu, hostBackendOf(config, facts),
                        "--clip-grad-norm runs on the host only"};
  if (config.precision == models::Precision::kBfloat16)
    return DeviceChoice{Device::kCpu, hostBackendOf(config, facts),
                        "--precision bf16 is for the CPU's matrix products"};
  if (config.exchange.backend) {
    return DeviceChoice{Device::kCpu, *config.exchange.backend,
                        "--backend " + std::string(engine::name(*config.exchange.backend)) +
                            " averages host buffers"};
  }
  if (config.exchange.compression != engine::Compression::kNone) {
    return DeviceChoice{Device::kCpu, engine::ExchangeBackend::kTuned,
                        "--compression " + std::string(engine::name(config.exchange.compression)) +
                            " runs on the host only"};
  }
  if (!why.empty()) return DeviceChoice{Device::kCpu, hostBackendOf(config, facts), why};
  return DeviceChoice{Device::kCuda, kNccl,
                      fmt::format("{} rank(s) on this node, {} GPU(s) visible", facts.localRanks,
                                  facts.visibleGpus)};
}

DeviceFacts deviceFacts(const TrainConfig& config, const collectives::MpiEnvironment& env) {
  DeviceFacts facts;
  facts.gpuPathBuilt = gpuTrainingBuilt();
  facts.localRanks = env.localSize();
  if (facts.gpuPathBuilt && config.device != Device::kCpu) {
    facts.visibleGpus = visibleGpus(&facts.noGpuReason);
  }
  // Every rank: its node fits on GPUs, its CPU has AVX512-BF16; the minimum says "all do".
  int all[2] = {nodeFitsOnGpus(facts) ? 1 : 0,
                models::bf16ProductsSupported() && !config.test.noAvx512Bf16 ? 1 : 0};
  RINGTRAIN_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, all, 2, MPI_INT, MPI_MIN, env.world()));
  facts.everyNodeFits = all[0] == 1;
  facts.bf16Everywhere = all[1] == 1;
  facts.nodes = env.nodeCount();
  facts.ranks = env.worldSize();
  return facts;
}

}  // namespace ringtrain::training
