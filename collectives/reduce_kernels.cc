#include "collectives/reduce_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include "base/vector_dispatch.h"

namespace ringtrain::collectives {
namespace {

// Integer sums wrap around (two's complement) instead of being undefined behaviour on overflow.
template <class T>
T wrappingAdd(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
}

struct SumOp {
  template <class T>
  static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return wrappingAdd(a, b);
    } else {
      return a + b;
    }
  }
};

struct MinOp {
  template <class T>
  static T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      if (a != a) return a;  // NaN wins
      if (b != b) return b;
      if (a == b) return std::signbit(a) ? a : b;  // -0 below +0
    }
    return b < a ? b : a;
  }
};

struct MaxOp {
  template <class T>
  static T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      if (a != a) return a;
      if (b != b) return b;
      if (a == b) return std::signbit(a) ? b : a;  // +0 above -0
    }
    return a < b ? b : a;
  }
};

// The hot loop of every reduction. `out` may equal `a` or `b`: element i reads only index i
// before writing it, so the loop vectorises safely (hence `omp simd`, which tells the compiler
// so without the runtime alias checks it would otherwise add).
template <class Op, class T>
RINGTRAIN_VECTOR_CLONES void combine(const T* a, const T* b, T* out, std::size_t count) {
#pragma omp simd
  for (std::size_t i = 0; i < count; ++i)
    out[i] = Op::apply(a[i], b[i]);
}

template <class T>
RINGTRAIN_VECTOR_CLONES void divide(T* data, std::size_t count, int divisor) {
  if constexpr (std::is_integral_v<T>) {
    const T d = static_cast<T>(divisor);
    for (std::size_t i = 0; i < count; ++i)
      data[i] = data[i] / d;
  } else {
    // A true division, not a multiplication by 1/divisor: one rounding, the same as the reference.
    const T d = static_cast<T>(divisor);
#pragma omp simd
    for (std::size_t i = 0; i < count; ++i)
      data[i] = data[i] / d;
  }
}

template <class T>
void reduceNative(ReduceOp op, const T* a, const T* b, T* out, std::size_t count, int divisor) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage:
      combine<SumOp>(a, b, out, count);
      break;
    case ReduceOp::kMin:
      combine<MinOp>(a, b, out, count);
      break;
    case ReduceOp::kMax:
      combine<MaxOp>(a, b, out, count);
      break;
  }
  if (divisor > 1) divide(out, count, divisor);
}

// 16-bit floats: widen a block to float32 (in L1), reduce there, round back once.
template <class Half>
void reduceHalf(ReduceOp op, const Half* a, const Half* b, Half* out, std::size_t count,
                int divisor) {
  constexpr std::size_t kBlock = 512;
  alignas(64) float wideA[kBlock];
  alignas(64) float wideB[kBlock];
  for (std::size_t begin = 0; begin < count; begin += kBlock) {
    const std::size_t n = std::min(kBlock, count - begin);
    convertToFloat(a + begin, wideA, n);
    convertToFloat(b + begin, wideB, n);
    reduceNative<float>(op, wideA, wideB, wideA, n, divisor);
    convertFromFloat(wideA, out + begin, n);
  }
}

template <class Half>
void divideHalf(Half* data, std::size_t count, int divisor) {
  constexpr std::size_t kBlock = 512;
  alignas(64) float wide[kBlock];
  for (std::size_t begin = 0; begin < count; begin += kBlock) {
    const std::size_t n = std::min(kBlock, count - begin);
    convertToFloat(data + begin, wide, n);
    divide(wide, n, divisor);
    convertFromFloat(wide, data + begin, n);
  }
}

void reduceCached(DataType type, ReduceOp op, const void* a, const void* b, void* out,
                  std::size_t count, int divisor) {
  switch (type) {
#define RINGTRAIN_REDUCE_CASE(kType, T, fn)                                                 \
  case DataType::kType:                                                                     \
    fn(op, static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(out), count, \
       divisor);                                                                            \
    return;
    RINGTRAIN_REDUCE_CASE(kFloat32, float, reduceNative)
    RINGTRAIN_REDUCE_CASE(kFloat64, double, reduceNative)
    RINGTRAIN_REDUCE_CASE(kInt32, std::int32_t, reduceNative)
    RINGTRAIN_REDUCE_CASE(kInt64, std::int64_t, reduceNative)
    RINGTRAIN_REDUCE_CASE(kFloat16, Float16, reduceHalf)
    RINGTRAIN_REDUCE_CASE(kBFloat16, BFloat16, reduceHalf)
#undef RINGTRAIN_REDUCE_CASE
  }
}

// Copies with non-temporal stores for the cache-line-aligned middle (no store fence). Without
// SSE2 (processors other than x86) a plain copy: the same bytes, through the cache.
void streamLines(void* out, const void* in, std::size_t bytes) {
#if defined(__SSE2__)
  auto* dst = static_cast<std::byte*>(out);
  const auto* src = static_cast<const std::byte*>(in);
  // Ordinary copies for the unaligned head and the tail; whole aligned lines in between.
  const std::size_t head = std::min(bytes, (64 - reinterpret_cast<std::uintptr_t>(dst) % 64) % 64);
  std::memcpy(dst, src, head);
  std::size_t i = head;
  for (; i + 64 <= bytes; i += 64) {
#if defined(__AVX512F__)
    _mm512_stream_si512(reinterpret_cast<__m512i*>(dst + i),
                        _mm512_loadu_si512(reinterpret_cast<const void*>(src + i)));
#elif defined(__AVX__)
    const auto* s = reinterpret_cast<const __m256i*>(src + i);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + i), _mm256_loadu_si256(s));
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + i + 32), _mm256_loadu_si256(s + 1));
#else
    const auto* s = reinterpret_cast<const __m128i*>(src + i);
    auto* d = reinterpret_cast<__m128i*>(dst + i);
    for (int k = 0; k < 4; ++k)
      _mm_stream_si128(d + k, _mm_loadu_si128(s + k));
#endif
  }
  std::memcpy(dst + i, src + i, bytes - i);
#else
  std::memcpy(out, in, bytes);
#endif
}

// Orders the non-temporal stores before later stores; ordinary stores need nothing here.
void storeFence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

// Reduces block by block into an L1-resident buffer and streams each block out.
void reduceStreaming(DataType type, ReduceOp op, const void* a, const void* b, void* out,
                     std::size_t count, int divisor) {
  constexpr std::size_t kBlockBytes = 4096;
  alignas(64) std::byte block[kBlockBytes];
  const std::size_t elementSize = sizeOf(type);
  const std::size_t blockElements = kBlockBytes / elementSize;
  const auto* x = static_cast<const std::byte*>(a);
  const auto* y = static_cast<const std::byte*>(b);
  auto* z = static_cast<std::byte*>(out);
  for (std::size_t begin = 0; begin < count; begin += blockElements) {
    const std::size_t n = std::min(blockElements, count - begin);
    const std::size_t offset = begin * elementSize;
    reduceCached(type, op, x + offset, y + offset, block, n, divisor);
    streamLines(z + offset, block, n * elementSize);
  }
  storeFence();
}

}  // namespace

void streamingCopy(void* out, const void* in, std::size_t bytes) {
  streamLines(out, in, bytes);
  storeFence();
}

void reduceArrays(DataType type, ReduceOp op, const void* a, const void* b, void* out,
                  std::size_t count, int divisor, StoreMode store) {
  if (store == StoreMode::kStreaming) {
    reduceStreaming(type, op, a, b, out, count, divisor);
  } else {
    reduceCached(type, op, a, b, out, count, divisor);
  }
}

void divideArray(DataType type, void* data, std::size_t count, int divisor) {
  if (divisor <= 1) return;
  switch (type) {
    case DataType::kFloat32:
      divide(static_cast<float*>(data), count, divisor);
      return;
    case DataType::kFloat64:
      divide(static_cast<double*>(data), count, divisor);
      return;
    case DataType::kInt32:
      divide(static_cast<std::int32_t*>(data), count, divisor);
      return;
    case DataType::kInt64:
      divide(static_cast<std::int64_t*>(data), count, divisor);
      return;
    case DataType::kFloat16:
      divideHalf(static_cast<Float16*>(data), count, divisor);
      return;
    case DataType::kBFloat16:
      divideHalf(static_cast<BFloat16*>(data), count, divisor);
      return;
  }
}

}  // namespace ringtrain::collectives
