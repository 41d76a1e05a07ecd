#include "models/bf16_gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "base/vector_dispatch.h"

// The kernels below are the only code built for AVX512-BF16; they run only where
// bf16ProductsSupported() said yes.
#define RINGTRAIN_BF16_TARGET __attribute__((target("avx512bf16,avx512f,avx512bw,avx512vl")))

namespace ringtrain::models {
namespace {

using Index = Eigen::Index;
using Bf16 = std::uint16_t;

// Register blocking: a micro-tile of C is kMr rows (two zmm registers) by kNr columns, 24
// accumulators. Cache blocking: kKc values of k (even, in pairs for vdpbf16ps), kMc rows of A,
// kNc columns of B per packed block.
constexpr Index kMr = 32;
constexpr Index kNr = 12;
constexpr Index kKc = 384;
constexpr Index kMc = 192;
constexpr Index kNc = 2040;

// Packing buffers, reused from call to call (one set per thread).
struct Buffers {
  std::vector<float> staging;
  std::vector<Bf16> rounded;
  std::vector<Bf16> a;
  std::vector<Bf16> b;
};

Buffers& buffers() {
  thread_local Buffers b;
  return b;
}

// out[i] = in[i] rounded to bfloat16 (nearest, ties to even), count a multiple of 16.
RINGTRAIN_BF16_TARGET void toBf16(const float* in, Bf16* out, Index count) {
  for (Index i = 0; i < count; i += 16) {
    const __m256bh packed = _mm512_cvtneps_pbh(_mm512_loadu_ps(in + i));
    std::memcpy(out + i, &packed, sizeof packed);
  }
}

// A block of a float32 matrix to pack: line l (a row of A, a column of B), value k of it at
// data[l * lineStride + k * depthStride].
struct Block {
  const float* data;
  Index lineStride;
  Index depthStride;
  Index lines;
  Index depth;
};

// The lowest n of 16 lanes (none for n <= 0).
__mmask16 lanes(Index n) {
  return n >= 16 ? __mmask16(0xFFFF) : n <= 0 ? __mmask16(0) : __mmask16((1U << n) - 1);
}

// One panel (lines first .. first+width, those past `count` zero) of a block whose lines are
// contiguous (lineStride 1): for each pair of k, 16 lines of the two k at once, interleaved.
RINGTRAIN_BF16_TARGET void packContiguousLines(const Block& block, Index first, Index count,
                                               Index width, Bf16* to) {
  alignas(64) static constexpr std::uint16_t kInterleave[32] = {
      0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
      8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  const __m512i interleave = _mm512_load_si512(kInterleave);
  const Index pairs = (block.depth + 1) / 2;
  for (Index p = 0; p < pairs; ++p) {
    const float* even = block.data + first + 2 * p * block.depthStride;
    const bool odd = 2 * p + 1 < block.depth;
    for (Index l = 0; l < width; l += 16) {
      const __mmask16 load = lanes(count - l);
      const __m512 lo = _mm512_maskz_loadu_ps(load, even + l);
      const __m512 hi =
          odd ? _mm512_maskz_loadu_ps(load, even + block.depthStride + l) : _mm512_setzero_ps();
      const __m512i pairsOf =
          _mm512_permutexvar_epi16(interleave, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
      const Index store = std::min<Index>(16, width - l);  // lines, two values each
      _mm512_mask_storeu_epi16(to + (p * width + l) * 2,
                               store >= 16 ? ~__mmask32(0) : (__mmask32(1) << (2 * store)) - 1,
                               pairsOf);
    }
  }
}

// Transposes the 16 x 16 32-bit values of r (row i in r[i]) in place. The all-lanes maskz_
// forms are the plain instructions; the unmasked intrinsics of GCC 12 trip -Wuninitialized on
// their own _mm512_undefined (GCC bug 105593).
RINGTRAIN_BF16_TARGET void transpose16(__m512i r[16]) {
  constexpr __mmask16 kAll16 = 0xFFFF;
  constexpr __mmask8 kAll8 = 0xFF;
  __m512i t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_maskz_unpacklo_epi32(kAll16, r[i], r[i + 1]);
    t[i + 1] = _mm512_maskz_unpackhi_epi32(kAll16, r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_maskz_unpacklo_epi64(kAll8, t[i], t[i + 2]);
    r[i + 1] = _mm512_maskz_unpackhi_epi64(kAll8, t[i], t[i + 2]);
    r[i + 2] = _mm512_maskz_unpacklo_epi64(kAll8, t[i + 1], t[i + 3]);
    r[i + 3] = _mm512_maskz_unpackhi_epi64(kAll8, t[i + 1], t[i + 3]);
  }
  for (int h = 0; h < 16; h += 8) {
    for (int i = 0; i < 4; ++i) {
      t[h + i] = _mm512_maskz_shuffle_i32x4(kAll16, r[h + i], r[h + i + 4], 0x88);
      t[h + i + 4] = _mm512_maskz_shuffle_i32x4(kAll16, r[h + i], r[h + i + 4], 0xdd);
    }
  }
  for (int i = 0; i < 8; ++i) {
    r[i] = _mm512_maskz_shuffle_i32x4(kAll16, t[i], t[i + 8], 0x88);
    r[i + 8] = _mm512_maskz_shuffle_i32x4(kAll16, t[i], t[i + 8], 0xdd);
  }
}

// One panel of a block whose values along k are contiguous (depthStride 1): tiles of 16 lines
// by 16 pairs of k, each line's pairs rounded at once, then transposed into pairs of lines.
RINGTRAIN_BF16_TARGET void packContiguousDepth(const Block& block, Index first, Index count,
                                               Index width, Bf16* to) {
  const Index pairs = (block.depth + 1) / 2;
  for (Index l0 = 0; l0 < width; l0 += 16) {
    const __mmask16 store = lanes(width - l0);
    for (Index p0 = 0; p0 < pairs; p0 += 16) {
      const Index left = block.depth - 2 * p0;
      __m512i r[16];
      for (Index i = 0; i < 16; ++i) {
        const bool inside = l0 + i < count;
        const float* from =
            inside ? block.data + (first + l0 + i) * block.lineStride + 2 * p0 : block.data;
        const __m512 lo = _mm512_maskz_loadu_ps(inside ? lanes(left) : 0, from);
        const __m512 hi = _mm512_maskz_loadu_ps(inside ? lanes(left - 16) : 0, from + 16);
        r[i] = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
      }
      transpose16(r);
      for (Index p = 0; p < std::min<Index>(16, pairs - p0); ++p)
        _mm512_mask_storeu_epi32(to + ((p0 + p) * width + l0) * 2, store, r[p]);
    }
  }
}

// One panel of any other block: staged in float32 in the packed order, then rounded.
void packAnyStrides(const Block& block, Index first, Index count, Index width, Bf16* to) {
  const Index pairs = (block.depth + 1) / 2;
  const Index size = (pairs * width * 2 + 15) / 16 * 16;  // whole vectors to convert
  std::vector<float>& staging = buffers().staging;
  staging.assign(static_cast<std::size_t>(size), 0.0F);
  for (Index k = 0; k < block.depth; ++k)
    for (Index line = 0; line < count; ++line)
      staging[(k / 2) * width * 2 + line * 2 + (k % 2)] =
          block.data[(first + line) * block.lineStride + k * block.depthStride];
  std::vector<Bf16>& rounded = buffers().rounded;
  rounded.resize(static_cast<std::size_t>(size));
  toBf16(staging.data(), rounded.data(), size);
  std::copy_n(rounded.begin(), pairs * width * 2, to);
}

// The block's values in the order the micro-kernel reads them, rounded to bfloat16. Panels of
// `width` lines; within a panel, for each pair of k, each line's two values side by side. Lines
// past the block's and k past its depth are zero. Reading follows the source's unit stride.
void packPanels(const Block& block, Index width, std::vector<Bf16>& out) {
  const Index pairs = (block.depth + 1) / 2;
  const Index panels = (block.lines + width - 1) / width;
  // Only grows: a resize that shrank would zero the elements again on the next growth.
  const auto size = static_cast<std::size_t>(panels * pairs * width * 2);
  if (out.size() < size) out.resize(size);
  for (Index panel = 0; panel < panels; ++panel) {
    const Index first = panel * width;
    const Index count = std::min(width, block.lines - first);
    Bf16* to = out.data() + panel * pairs * width * 2;
    if (block.lineStride == 1) {
      packContiguousLines(block, first, count, width, to);
    } else if (block.depthStride == 1) {
      packContiguousDepth(block, first, count, width, to);
    } else {
      packAnyStrides(block, first, count, width, to);
    }
  }
}

// c[0:rows, 0:cols] (column-major, leading dimension ldc) = (or +=) the product of one packed
// panel of A (kMr rows) and one of B (kNr columns) over `pairs` pairs of k.
RINGTRAIN_BF16_TARGET void microKernel(Index pairs, const Bf16* a, const Bf16* b, float* c,
                                       Index ldc, Index rows, Index cols, bool accumulate) {
  __m512 acc[2][kNr];
  for (Index j = 0; j < kNr; ++j)
    acc[0][j] = acc[1][j] = _mm512_setzero_ps();
  for (Index p = 0; p < pairs; ++p) {
    const __m512bh a0 = (__m512bh)_mm512_loadu_si512(a + p * kMr * 2);
    const __m512bh a1 = (__m512bh)_mm512_loadu_si512(a + p * kMr * 2 + 32);
    const Bf16* bp = b + p * kNr * 2;
    for (Index j = 0; j < kNr; ++j) {
      std::int32_t pair;
      std::memcpy(&pair, bp + j * 2, sizeof pair);
      const __m512bh bj = (__m512bh)_mm512_set1_epi32(pair);
      acc[0][j] = _mm512_dpbf16_ps(acc[0][j], a0, bj);
      acc[1][j] = _mm512_dpbf16_ps(acc[1][j], a1, bj);
    }
  }
  const __mmask16 m0 = lanes(rows);
  const __mmask16 m1 = lanes(rows - 16);
  for (Index j = 0; j < cols; ++j) {
    float* column = c + j * ldc;
    __m512 v0 = acc[0][j];
    __m512 v1 = acc[1][j];
    if (accumulate) {
      v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(m0, column));
      v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(m1, column + 16));
    }
    _mm512_mask_storeu_ps(column, m0, v0);
    _mm512_mask_storeu_ps(column + 16, m1, v1);
  }
}

ConstStrided transposed(const ConstStrided& m) {
  return {m.data, m.cols, m.rows, m.colStride, m.rowStride};
}

// c (column-major, leading dimension ldc) = (or +=) a·b, blocked and packed.
void columnMajorProduct(const ConstStrided& a, const ConstStrided& b, float* c, Index ldc,
                        bool accumulate) {
  Buffers& buf = buffers();
  const Index m = a.rows;
  const Index n = b.cols;
  const Index k = a.cols;
  for (Index jc = 0; jc < n; jc += kNc) {
    const Index nc = std::min(kNc, n - jc);
    for (Index pc = 0; pc < k; pc += kKc) {
      const Index kc = std::min(kKc, k - pc);
      const Index pairs = (kc + 1) / 2;
      packPanels({b.data + pc * b.rowStride + jc * b.colStride, b.colStride, b.rowStride, nc, kc},
                 kNr, buf.b);
      const bool add = accumulate || pc > 0;
      for (Index ic = 0; ic < m; ic += kMc) {
        const Index mc = std::min(kMc, m - ic);
        packPanels({a.data + ic * a.rowStride + pc * a.colStride, a.rowStride, a.colStride, mc, kc},
                   kMr, buf.a);
        for (Index jr = 0; jr < nc; jr += kNr) {
          const Bf16* bPanel = buf.b.data() + (jr / kNr) * pairs * kNr * 2;
          for (Index ir = 0; ir < mc; ir += kMr) {
            const Bf16* aPanel = buf.a.data() + (ir / kMr) * pairs * kMr * 2;
            microKernel(pairs, aPanel, bPanel, c + (ic + ir) + (jc + jr) * ldc, ldc,
                        std::min(kMr, mc - ir), std::min(kNr, nc - jr), add);
          }
        }
      }
    }
  }
}

}  // namespace

bool bf16ProductsSupported() {
  return base::cpuHas(base::CpuFeature::kAvx512Bf16);
}

void bf16Product(const ConstStrided& a, const ConstStrided& b, const MutableStrided& c,
                 bool accumulate) {
  if (a.cols != b.rows || c.rows != a.rows || c.cols != b.cols)
    throw std::invalid_argument("bf16Product: the matrices' shapes do not match");
  if (c.rows == 0 || c.cols == 0) return;
  if (a.cols == 0) {
    if (!accumulate) {
      for (Index j = 0; j < c.cols; ++j)
        for (Index i = 0; i < c.rows; ++i)
          c.data[i * c.rowStride + j * c.colStride] = 0.0F;
    }
    return;
  }
  if (c.rowStride == 1) {
    columnMajorProduct(a, b, c.data, c.colStride, accumulate);
  } else if (c.colStride == 1) {  // row-major c: its transpose is column-major, c' = b'·a'
    columnMajorProduct(transposed(b), transposed(a), c.data, c.rowStride, accumulate);
  } else {
    throw std::invalid_argument("bf16Product: c must be column- or row-major");
  }
}

}  // namespace ringtrain::models
