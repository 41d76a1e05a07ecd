// The machine's memory, for refusing sizes it cannot hold before they are allocated.
#pragma once

#include <cstdint>

namespace ringtrain {

// Physical memory in bytes (sysconf: pages x page size); 0 where it cannot be told.
std::uint64_t physicalMemoryBytes();

// `bytes` in GiB, for messages.
double gibibytes(double bytes);

}  // namespace ringtrain
