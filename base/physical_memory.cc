#include "base/physical_memory.h"

#include <unistd.h>

namespace ringtrain {

std::uint64_t physicalMemoryBytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long pageSize = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || pageSize <= 0) return 0;
  return static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(pageSize);
}

double gibibytes(double bytes) {
  return bytes / (1024.0 * 1024.0 * 1024.0);
}

}  // namespace ringtrain
