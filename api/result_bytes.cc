// ResultAllocator's memory (ringtrain.h): results of all-gathers and all-to-alls are often tens
// of megabytes, fresh each call (Horovod's API returns new tensors). Such a buffer on 4 KiB pages
// costs one page fault per page at its first write, more than the copy itself where faults are
// dear; on 2 MiB pages, 1/512 of them.
#include <sys/mman.h>

#include <cstdlib>
#include <new>

#include "ringtrain/ringtrain.h"

namespace ringtrain::detail {
namespace {
constexpr std::size_t kHugePage = std::size_t{2} << 20;
}

void* allocateResultBytes(std::size_t bytes) {
  if (bytes < kHugePage) {
    if (void* p = std::malloc(bytes == 0 ? 1 : bytes)) return p;
    throw std::bad_alloc();
  }
  const std::size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  void* p = std::aligned_alloc(kHugePage, rounded);
  if (p == nullptr) throw std::bad_alloc();
  // A request, not a need: where transparent huge pages are off, the pages are the usual ones.
  (void)madvise(p, rounded, MADV_HUGEPAGE);
  return p;
}

void freeResultBytes(void* data, std::size_t) noexcept {
  std::free(data);
}

}  // namespace ringtrain::detail
