#include "collectives/device_collectives.h"

#include <stdexcept>

namespace ringtrain::collectives {

std::size_t elementBytes(DeviceElement type) {
  switch (type) {
    case DeviceElement::kFloat64:
    case DeviceElement::kInt64:
      return 8;
    case DeviceElement::kFloat32:
    case DeviceElement::kInt32:
      return 4;
    case DeviceElement::kFloat16:
    case DeviceElement::kBFloat16:
      return 2;
    case DeviceElement::kUInt8:
    case DeviceElement::kInt8:
      return 1;
  }
  return 1;
}

#ifndef RINGTRAIN_HAVE_NCCL
// A build without the GPU path (nccl_device_collectives.cc holds the real ones).

bool deviceCollectivesBuilt() {
  return false;
}

int ncclVersionCode() {
  return 0;
}

std::string devicePointerProblem(const void*, std::size_t, int) {
  return "this build of ringtrain has no GPU path";
}

std::unique_ptr<DeviceCollectives> makeDeviceCollectives(MPI_Comm, int) {
  throw std::runtime_error("this build of ringtrain has no GPU path");
}
#endif

}  // namespace ringtrain::collectives
