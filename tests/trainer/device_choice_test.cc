// --device auto|cpu|cuda and --backend auto: what each combination of options and machine
// trains on, and the one-line refusals.
#include "training/device_choice.h"

#include <gtest/gtest.h>

#include <string>
#include <variant>

namespace ringtrain::training {
namespace {

// The options as the command line names them.
TrainConfig options(std::string_view device, std::string_view backend = "auto",
                    std::string_view compression = "none") {
  TrainConfig c;
  c.device = valueIn(kDeviceNames, device).value();
  if (backend != "auto")
    c.exchange.backend = valueIn(engine::kExchangeBackendNames, backend).value();
  c.exchange.compression = valueIn(engine::kCompressionNames, compression).value();
  return c;
}

std::string_view deviceName(Device device) {
  return nameIn(kDeviceNames, device);
}

DeviceFacts gpus(int localRanks, int visible) {
  DeviceFacts f;
  f.gpuPathBuilt = true;
  f.localRanks = localRanks;
  f.visibleGpus = visible;
  f.noGpuReason = visible == 0 ? "cudaErrorNoDevice" : "";
  f.everyNodeFits = nodeFitsOnGpus(f);
  return f;
}

DeviceFacts cpuOnlyBuild() {
  DeviceFacts f;
  f.everyNodeFits = false;
  return f;
}

DeviceChoice chosen(const TrainConfig& c, const DeviceFacts& f) {
  const auto choice = chooseDevice(c, f);
  if (const auto* error = std::get_if<std::string>(&choice)) ADD_FAILURE() << *error;
  return std::holds_alternative<DeviceChoice>(choice) ? std::get<DeviceChoice>(choice)
                                                      : DeviceChoice{};
}

std::string refusal(const TrainConfig& c, const DeviceFacts& f) {
  const auto choice = chooseDevice(c, f);
  return std::holds_alternative<std::string>(choice) ? std::get<std::string>(choice) : "";
}

TEST(DeviceChoice, AutoTakesTheGpusWhenEveryRankHasOne) {
  const DeviceChoice c = chosen(options("auto"), gpus(2, 2));
  EXPECT_EQ(deviceName(c.device), "cuda");
  EXPECT_EQ(engine::name(c.backend), "nccl");
  EXPECT_NE(c.reason.find("2 GPU(s) visible"), std::string::npos) << c.reason;
}

TEST(DeviceChoice, AutoStaysOnTheCpuAndSaysWhy) {
  DeviceChoice c = chosen(options("auto"), cpuOnlyBuild());
  EXPECT_EQ(deviceName(c.device), "cpu");
  EXPECT_EQ(engine::name(c.backend), "tuned");
  EXPECT_NE(c.reason.find("this build has no GPU path"), std::string::npos) << c.reason;

  c = chosen(options("auto"), gpus(1, 0));
  EXPECT_EQ(deviceName(c.device), "cpu");
  EXPECT_NE(c.reason.find("no GPU visible (cudaErrorNoDevice)"), std::string::npos) << c.reason;

  c = chosen(options("auto"), gpus(4, 2));
  EXPECT_EQ(deviceName(c.device), "cpu");
  EXPECT_NE(c.reason.find("4 ranks on this node but 2 GPU(s) visible"), std::string::npos);

  DeviceFacts otherNodeShort = gpus(1, 1);
  otherNodeShort.everyNodeFits = false;
  c = chosen(options("auto"), otherNodeShort);
  EXPECT_EQ(deviceName(c.device), "cpu");
  EXPECT_NE(c.reason.find("another node"), std::string::npos) << c.reason;
}

TEST(DeviceChoice, AutoKeepsHostOnlyOptionsOnTheHost) {
  DeviceChoice c = chosen(options("auto", "mpi"), gpus(1, 1));
  EXPECT_EQ(deviceName(c.device), "cpu");
  EXPECT_EQ(engine::name(c.backend), "mpi");
  c = chosen(options("auto", "auto", "fp16"), gpus(1, 1));
  EXPECT_EQ(deviceName(c.device), "cpu");
  EXPECT_EQ(engine::name(c.backend), "tuned");
}

// Every rank on one node: auto averages through shared memory on the host, unless compression
// asks for messages; a job across nodes, or an explicit backend, keeps its backend.
TEST(DeviceChoice, AutoOnOneNodeTakesSharedMemory) {
  DeviceFacts oneNode = cpuOnlyBuild();
  oneNode.ranks = 2;
  EXPECT_EQ(engine::name(chosen(options("auto"), oneNode).backend), "shm");
  EXPECT_EQ(engine::name(chosen(options("cpu"), oneNode).backend), "shm");
  EXPECT_EQ(engine::name(chosen(options("cpu", "auto", "bf16"), oneNode).backend), "tuned");
  EXPECT_EQ(engine::name(chosen(options("cpu", "ring"), oneNode).backend), "ring");
  EXPECT_EQ(engine::name(chosen(options("cpu"), cpuOnlyBuild()).backend), "tuned");
  DeviceFacts gpusOnOneNode = gpus(2, 2);
  gpusOnOneNode.ranks = 2;
  EXPECT_EQ(engine::name(chosen(options("auto"), gpusOnOneNode).backend), "nccl");
}

// --backend shm across nodes is refused up front (one line, exit status 2 on every rank) rather
// than failing later in the shared window's set-up; on one node, or with one rank, it is taken.
TEST(DeviceChoice, SharedMemoryAcrossNodesIsRefused) {
  DeviceFacts twoNodes = cpuOnlyBuild();
  twoNodes.nodes = 2;
  twoNodes.ranks = 4;
  EXPECT_EQ(refusal(options("cpu", "shm"), twoNodes),
            "--backend shm needs every rank on one node, but the 4 ranks are on 2 nodes: use "
            "--backend ring, hierarchical or auto across nodes");
  EXPECT_EQ(refusal(options("auto", "shm"), twoNodes).rfind("--backend shm needs", 0), 0u);
  EXPECT_EQ(engine::name(chosen(options("cpu"), twoNodes).backend), "tuned");  // auto across nodes
  DeviceFacts oneNode = cpuOnlyBuild();
  oneNode.ranks = 4;
  EXPECT_EQ(engine::name(chosen(options("cpu", "shm"), oneNode).backend), "shm");
  EXPECT_EQ(engine::name(chosen(options("cpu", "shm"), cpuOnlyBuild()).backend),
            "shm");  // one rank
}

// --zero 1 shards on the host: auto stays on the CPU, and where auto would take shm (every rank
// on one node) it is refused, saying to pass --backend ring; across nodes auto's tuned shards.
TEST(DeviceChoice, ZeroOneStaysOnTheHostAndRefusesAutosSharedMemory) {
  TrainConfig zero = options("auto");
  zero.zero = 1;
  const DeviceChoice c = chosen(zero, gpus(1, 1));
  EXPECT_EQ(deviceName(c.device), "cpu");
  EXPECT_EQ(c.reason, "--zero 1 runs on the host only");
  DeviceFacts oneNode = cpuOnlyBuild();
  oneNode.ranks = 2;
  EXPECT_EQ(refusal(zero, oneNode),
            "--zero 1: --backend auto takes shm here (every rank on one node), which cannot "
            "shard the optimiser state: pass --backend ring");
  TrainConfig ring = options("cpu", "ring");
  ring.zero = 1;
  EXPECT_EQ(engine::name(chosen(ring, oneNode).backend), "ring");
  DeviceFacts twoNodes = cpuOnlyBuild();
  twoNodes.nodes = 2;
  twoNodes.ranks = 4;
  EXPECT_EQ(engine::name(chosen(zero, twoNodes).backend), "tuned");
}

TEST(DeviceChoice, AnExplicitDeviceIsTakenOrRefused) {
  EXPECT_EQ(deviceName(chosen(options("cpu"), gpus(1, 8)).device), "cpu");
  EXPECT_EQ(engine::name(chosen(options("cpu", "hierarchical"), gpus(1, 8)).backend),
            "hierarchical");
  EXPECT_EQ(engine::name(chosen(options("cuda"), gpus(2, 8)).backend), "nccl");
  EXPECT_EQ(deviceName(chosen(options("auto", "nccl"), gpus(1, 1)).device), "cuda");

  EXPECT_EQ(refusal(options("cuda"), cpuOnlyBuild())
                .rfind("--device cuda: this build has no GPU path", 0),
            0u);
  EXPECT_EQ(refusal(options("cuda"), gpus(1, 0)).rfind("--device cuda: no GPU visible", 0), 0u);
  EXPECT_NE(refusal(options("cuda"), gpus(3, 2)).find("mpirun -npernode 2"), std::string::npos);
  EXPECT_NE(refusal(options("cuda"), gpus(3, 2)).find("mpiexec -ppn 2"), std::string::npos);
  EXPECT_EQ(refusal(options("auto", "nccl"), gpus(1, 0)).rfind("--backend nccl", 0), 0u);
}

// Gradient accumulation runs on both paths: it does not keep auto on the host.
TEST(DeviceChoice, AutoTakesTheGpuWithAccumulation) {
  TrainConfig accumulating = options("auto");
  accumulating.accumulateSteps = 4;
  EXPECT_EQ(deviceName(chosen(accumulating, gpus(1, 1)).device), "cuda");
  EXPECT_EQ(deviceName(chosen(accumulating, gpus(1, 0)).device), "cpu");
}

// --precision bf16 keeps auto on the host, and is refused where a rank's CPU (any rank's: the
// facts are gathered over the job) has no AVX512-BF16.
TEST(DeviceChoice, Bfloat16StaysOnTheCpuAndNeedsItsInstructionsOnEveryRank) {
  TrainConfig c = options("auto");
  c.precision = models::Precision::kBfloat16;
  const DeviceChoice choice = chosen(c, gpus(1, 1));
  EXPECT_EQ(deviceName(choice.device), "cpu");
  EXPECT_NE(choice.reason.find("--precision bf16"), std::string::npos) << choice.reason;
  DeviceFacts noBf16 = cpuOnlyBuild();
  noBf16.bf16Everywhere = false;
  EXPECT_EQ(refusal(c, noBf16),
            "--precision bf16 needs a CPU with AVX512-BF16 instructions, and this job's (on one "
            "rank at least) has none: use --precision fp32");
  c.precision = models::Precision::kFloat32;
  EXPECT_EQ(deviceName(chosen(c, noBf16).device), "cpu");
}

TEST(DeviceChoice, BackendsOfTheCommunicators) {
  EXPECT_EQ(engine::name(gradientBackend(options("cpu"))), "tuned");
  EXPECT_EQ(engine::name(gradientBackend(options("cuda"))), "nccl");
  EXPECT_EQ(engine::name(gradientBackend(options("cpu", "mpi"))), "mpi");
  EXPECT_EQ(collectives::name(engine::controlBackend(gradientBackend(options("cpu", "mpi")))),
            "mpi");
  EXPECT_EQ(collectives::name(engine::controlBackend(gradientBackend(options("cuda", "nccl")))),
            "ring");  // the control traffic is host data
  EXPECT_EQ(engine::name(gradientBackend(options("cpu", "shm"))), "shm");
  EXPECT_EQ(collectives::name(engine::controlBackend(gradientBackend(options("cpu", "shm")))),
            "ring");  // shm averages gradients only
}

}  // namespace
}  // namespace ringtrain::training
