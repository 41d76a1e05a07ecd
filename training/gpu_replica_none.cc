// The GPU path's entry points in a build without it (no models/cuda library): see gpu_replica.h.
#include <stdexcept>

#include "training/gpu_replica.h"

namespace ringtrain::training {

bool gpuTrainingBuilt() {
  return false;
}

int visibleGpus(std::string* why) {
  if (why != nullptr) *why = "this build has no GPU path";
  return 0;
}

std::unique_ptr<GpuReplica> makeGpuReplica(const models::Model<float>&, const OptimizerOptions&,
                                           const GpuReplicaOptions&, collectives::Communicator&) {
  throw std::logic_error("--device cuda: this build has no GPU path");
}

}  // namespace ringtrain::training
