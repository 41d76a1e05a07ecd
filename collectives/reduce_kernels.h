// The element-wise reductions behind every all-reduce backend that runs on the CPU.
#pragma once

#include <cstddef>

#include "collectives/data_type.h"

namespace ringtrain::collectives {

// How reduceArrays writes `out`.
enum class StoreMode {
  // Ordinary stores: the result stays in this core's cache (small buffers, results read next).
  kCached,
  // Non-temporal stores that bypass the cache. For results another process reads next (a ring
  // chunk about to be sent): an ordinary store must first own the line, and when the peer read
  // that line in the previous all-reduce (as it does every training step) that costs a
  // cross-core round trip per line; a non-temporal store skips it. Ends with a store fence, so
  // the data is visible before MPI tells the peer about it. Builds for processors without such
  // stores (other than x86) store as kCached does; the results are the same either way.
  kStreaming,
};

// out[i] = a[i] op b[i] for i < count; with divisor > 1 the result is then divided by divisor
// (the last step of an average: kAverage accumulates as a sum). `out` may be `a` or `b` itself
// but must not partly overlap either. float16 and bfloat16 are computed in float32 and rounded
// once per call. Min and max propagate NaN and order -0 below +0, so that op(a, b) and op(b, a)
// give the same bits.
void reduceArrays(DataType type, ReduceOp op, const void* a, const void* b, void* out,
                  std::size_t count, int divisor = 1, StoreMode store = StoreMode::kCached);

// memcpy with non-temporal stores for the cache-line-aligned middle, then a store fence (a plain
// memcpy where the processor has no such stores).
void streamingCopy(void* out, const void* in, std::size_t bytes);

// data[i] /= divisor (an average computed as a sum elsewhere, e.g. by MPI_Allreduce).
void divideArray(DataType type, void* data, std::size_t count, int divisor);

}  // namespace ringtrain::collectives
