// A heap buffer aligned to a cache line, touched once when allocated.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

namespace ringtrain::collectives {

// Scratch space that collectives keep for their whole life, and the buffers programs hand to
// them. It is allocated once, not per call, and written once up front: first-touch page faults
// cost far more than the copies they precede, and per-call temporary buffers (as Open MPI's own
// all-reduce allocates) pay them on every call.
//
// Buffers of 2 MiB and more are backed by transparent huge pages where the kernel allows it
// (MADV_HUGEPAGE, before the first touch): one fault maps 2 MiB instead of 4 KiB, and Open MPI's
// single-copy transfers between processes (CMA, process_vm_readv) are faster on them, since the
// kernel pins one page per 2 MiB instead of 512.
class AlignedBuffer {
 public:
  static constexpr std::size_t kAlignment = 64;
  static constexpr std::size_t kHugePage = std::size_t{2} << 20;

  AlignedBuffer() = default;
  explicit AlignedBuffer(std::size_t bytes) { resize(bytes); }

  // Grows to at least `bytes` (contents are not kept); never shrinks.
  void resize(std::size_t bytes) {
    if (bytes <= size_) return;
    const std::size_t alignment = bytes >= kHugePage ? kHugePage : kAlignment;
    const std::size_t rounded = (bytes + alignment - 1) / alignment * alignment;
    void* memory = std::aligned_alloc(alignment, rounded);
    if (memory == nullptr) throw std::bad_alloc();
    if (alignment == kHugePage) ::madvise(memory, rounded, MADV_HUGEPAGE);  // a hint; may be off
    std::memset(memory, 0, rounded);
    data_.reset(static_cast<std::byte*>(memory));
    size_ = rounded;
  }

  std::byte* data() { return data_.get(); }
  const std::byte* data() const { return data_.get(); }
  std::size_t size() const { return size_; }

 private:
  struct Free {
    void operator()(std::byte* p) const { std::free(p); }
  };
  std::unique_ptr<std::byte, Free> data_;
  std::size_t size_ = 0;
};

}  // namespace ringtrain::collectives
