#include <algorithm>

#include "models/cuda/cuda_errors.h"
#include "models/cuda/layer_kernels.h"

namespace ringtrain::models::cuda {
namespace {

constexpr int kThreads = 256;
// One block per loss: deterministic sums, and a batch's loss is too small to need more.
constexpr int kLossThreads = 512;

// Enough blocks to cover `count` with grid-stride loops, capped: beyond a few waves of the
// largest GPU more blocks only add scheduling.
unsigned blocksFor(std::int64_t count) {
  const std::int64_t blocks = (count + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::clamp<std::int64_t>(blocks, 1, 65536));
}

// Grid-stride loop index helpers, in index type I: the kernels that divide per element do it in
// 32 bits where the whole range fits (a 64-bit division is a long emulated sequence on a GPU).
template <class I = std::int64_t>
__device__ I firstIndex() {
  return static_cast<I>(blockIdx.x) * static_cast<I>(blockDim.x) + static_cast<I>(threadIdx.x);
}
template <class I = std::int64_t>
__device__ I gridStride() {
  return static_cast<I>(gridDim.x) * static_cast<I>(blockDim.x);
}

// Calls launch(I{}) with I = int32 when `count` and a grid stride beyond it fit, else int64.
template <class Launch>
void withIndexType(std::int64_t count, const Launch& launch) {
  constexpr std::int64_t kInt32Room = std::int64_t{1} << 30;
  if (count < kInt32Room) {
    launch(std::int32_t{});
  } else {
    launch(std::int64_t{});
  }
}

template <class I>
__global__ void addBiasKernel(float* y, const float* bias, I rows, I count, float* reluOutput) {
  for (I i = firstIndex<I>(); i < count; i += gridStride<I>()) {
    const float v = y[i] + bias[i % rows];
    y[i] = v;
    if (reluOutput != nullptr) reluOutput[i] = v < 0.0f ? 0.0f : v;
  }
}

__global__ void reluKernel(const float* x, float* y, std::int64_t count) {
  // `x < 0 ? 0 : x` as on the CPU: a NaN passes through instead of being hidden.
  for (std::int64_t i = firstIndex(); i < count; i += gridStride())
    y[i] = x[i] < 0.0f ? 0.0f : x[i];
}

__global__ void reluBackwardKernel(const float* y, const float* dy, float* dx, std::int64_t count) {
  for (std::int64_t i = firstIndex(); i < count; i += gridStride())
    dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

__global__ void fillKernel(float* values, float value, std::int64_t count) {
  for (std::int64_t i = firstIndex(); i < count; i += gridStride())
    values[i] = value;
}

// biasGradient: blocks of 32 rows × 8 column lanes, each block over one range of columns.
constexpr int kBiasRowTile = 32;
constexpr int kBiasLanes = 8;
constexpr std::int64_t kBiasBlocks = 1024;  // column ranges at most, so partials stay small
constexpr std::int64_t kBiasLeastColumns = 64;

__global__ void biasPartialsKernel(const float* dy, std::int64_t rows, std::int64_t columns,
                                   std::int64_t perBlock, float* partials) {
  __shared__ float sums[kBiasLanes][kBiasRowTile];
  const std::int64_t r = static_cast<std::int64_t>(blockIdx.y) * kBiasRowTile + threadIdx.x;
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * perBlock;
  const std::int64_t last = min(first + perBlock, columns);
  float sum = 0.0f;
  if (r < rows)
    for (std::int64_t j = first + threadIdx.y; j < last; j += kBiasLanes)
      sum += dy[j * rows + r];
  sums[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && r < rows) {
    float total = 0.0f;
    for (int lane = 0; lane < kBiasLanes; ++lane)
      total += sums[lane][threadIdx.x];
    partials[static_cast<std::int64_t>(blockIdx.x) * rows + r] = total;
  }
}

// One block per row: its threads add strided partials, then a tree in a fixed order.
__global__ void biasTotalsKernel(const float* partials, std::int64_t rows, std::int64_t blocks,
                                 float* db) {
  __shared__ float sums[kThreads];
  const std::int64_t r = blockIdx.x;
  float sum = 0.0f;
  for (std::int64_t b = threadIdx.x; b < blocks; b += blockDim.x)
    sum += partials[b * rows + r];
  sums[threadIdx.x] = sum;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) sums[threadIdx.x] += sums[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) db[r] = sums[0];
}

// (c, h, w) of value v of a channels-last sample.
struct Pixel {
  int c, h, w;
};
__device__ Pixel channelsLastPixel(int v, int channels, int width) {
  return {v % channels, v / (channels * width), (v / channels) % width};
}

__device__ std::int64_t imageOffset(const ConvGeometry& g, int c, int h, int w) {
  return g.channelsFirst ? (static_cast<std::int64_t>(c) * g.height + h) * g.width + w
                         : (static_cast<std::int64_t>(h) * g.width + w) * g.channels + c;
}

// One thread per entry of the K×N column matrix: consecutive threads write consecutive entries.
template <class I>
__global__ void im2colKernel(const float* x, float* columns, ConvGeometry g, I count) {
  const I fieldSize = static_cast<I>(g.kernel) * g.kernel * g.channels;
  const I pixels = static_cast<I>(g.outHeight) * g.outWidth;
  const std::int64_t sampleSize = static_cast<std::int64_t>(g.channels) * g.height * g.width;
  for (I e = firstIndex<I>(); e < count; e += gridStride<I>()) {
    const I field = e / fieldSize;
    const int k = static_cast<int>(e - field * fieldSize);
    const I b = field / pixels;
    const int pixel = static_cast<int>(field - b * pixels);
    const int c = k % g.channels;
    const int j = (k / g.channels) % g.kernel;
    const int i = k / (g.channels * g.kernel);
    const int h = (pixel / g.outWidth) * g.stride - g.padding + i;
    const int w = (pixel % g.outWidth) * g.stride - g.padding + j;
    const bool inside = h >= 0 && h < g.height && w >= 0 && w < g.width;
    columns[e] = inside ? x[b * sampleSize + imageOffset(g, c, h, w)] : 0.0f;
  }
}

// One thread per input value: it gathers the column entries that read it (no atomics, so the
// sums come out the same every run).
template <class I>
__global__ void col2imKernel(const float* columns, float* dx, ConvGeometry g, I count) {
  const std::int64_t fieldSize = static_cast<std::int64_t>(g.kernel) * g.kernel * g.channels;
  const std::int64_t pixels = static_cast<std::int64_t>(g.outHeight) * g.outWidth;
  const int sampleSize = g.channels * g.height * g.width;
  for (I t = firstIndex<I>(); t < count; t += gridStride<I>()) {
    const I b = t / sampleSize;
    const int v = static_cast<int>(t - b * sampleSize);
    int c, h, w;
    if (g.channelsFirst) {
      c = v / (g.height * g.width);
      h = (v / g.width) % g.height;
      w = v % g.width;
    } else {
      const Pixel p = channelsLastPixel(v, g.channels, g.width);
      c = p.c;
      h = p.h;
      w = p.w;
    }
    float sum = 0.0f;
    for (int i = 0; i < g.kernel; ++i) {
      const int hs = h + g.padding - i;  // = ho * stride
      if (hs < 0 || hs % g.stride != 0 || hs / g.stride >= g.outHeight) continue;
      for (int j = 0; j < g.kernel; ++j) {
        const int ws = w + g.padding - j;
        if (ws < 0 || ws % g.stride != 0 || ws / g.stride >= g.outWidth) continue;
        const std::int64_t field = b * pixels + (hs / g.stride) * g.outWidth + ws / g.stride;
        sum += columns[field * fieldSize + (i * g.kernel + j) * g.channels + c];
      }
    }
    dx[b * sampleSize + imageOffset(g, c, h, w)] = sum;
  }
}

template <class I>
__global__ void maxPoolForwardKernel(const float* x, float* y, std::int32_t* winners,
                                     PoolGeometry g, I count) {
  const int outSize = g.channels * g.outHeight * g.outWidth;
  const int inSize = g.channels * g.height * g.width;
  for (I o = firstIndex<I>(); o < count; o += gridStride<I>()) {
    const I b = o / outSize;
    const int v = static_cast<int>(o - b * outSize);
    const Pixel out = channelsLastPixel(v, g.channels, g.outWidth);
    const int c = out.c, ho = out.h, wo = out.w;
    const float* sample = x + static_cast<std::int64_t>(b) * inSize;
    // The same order and comparison as the CPU: the first maximum wins, and a NaN in the first
    // position stays.
    float best = 0.0f;
    int winner = 0;
    for (int i = 0; i < g.kernel; ++i) {
      for (int j = 0; j < g.kernel; ++j) {
        const int offset = ((ho * g.stride + i) * g.width + wo * g.stride + j) * g.channels + c;
        const float candidate = sample[offset];
        if ((i == 0 && j == 0) || candidate > best) {
          best = candidate;
          winner = offset;
        }
      }
    }
    y[o] = best;
    winners[o] = winner;
  }
}

// One thread per input value: it adds the gradients of the outputs it won (several when windows
// overlap), so no atomics are needed.
template <class I>
__global__ void maxPoolBackwardKernel(const float* dy, const std::int32_t* winners, float* dx,
                                      PoolGeometry g, I count) {
  const int outSize = g.channels * g.outHeight * g.outWidth;
  const int inSize = g.channels * g.height * g.width;
  for (I t = firstIndex<I>(); t < count; t += gridStride<I>()) {
    const I b = t / inSize;
    const int v = static_cast<int>(t - b * inSize);
    const Pixel in = channelsLastPixel(v, g.channels, g.width);
    const int c = in.c, h = in.h, w = in.w;
    const int hoFirst = h < g.kernel ? 0 : (h - g.kernel) / g.stride + 1;
    const int hoLast = min(h / g.stride, g.outHeight - 1);
    const int woFirst = w < g.kernel ? 0 : (w - g.kernel) / g.stride + 1;
    const int woLast = min(w / g.stride, g.outWidth - 1);
    float sum = 0.0f;
    for (int ho = hoFirst; ho <= hoLast; ++ho) {
      for (int wo = woFirst; wo <= woLast; ++wo) {
        const std::int64_t o =
            static_cast<std::int64_t>(b) * outSize + (ho * g.outWidth + wo) * g.channels + c;
        if (winners[o] == v) sum += dy[o];
      }
    }
    dx[t] = sum;
  }
}

// Block-wide sums of each thread's (loss, correct); thread 0 writes them.
__device__ void writeBlockSums(double loss, long long correct, LossSums* sums) {
  __shared__ double losses[kLossThreads];
  __shared__ long long corrects[kLossThreads];
  losses[threadIdx.x] = loss;
  corrects[threadIdx.x] = correct;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) {
      losses[threadIdx.x] += losses[threadIdx.x + half];
      corrects[threadIdx.x] += corrects[threadIdx.x + half];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) *sums = {losses[0], corrects[0]};
}

// One block; each thread takes whole samples (a sample's classes are few).
__global__ void softmaxCrossEntropyKernel(const float* logits, const std::int32_t* labels,
                                          std::int64_t classes, std::int64_t batch, float* gradient,
                                          LossSums* sums) {
  double loss = 0;
  long long correct = 0;
  const float inverseBatch = 1.0f / static_cast<float>(batch);
  for (std::int64_t b = threadIdx.x; b < batch; b += blockDim.x) {
    const float* z = logits + b * classes;
    const int label = labels[b];
    float maximum = z[0];
    for (std::int64_t k = 1; k < classes; ++k)
      maximum = fmaxf(maximum, z[k]);
    float sum = 0.0f;
    for (std::int64_t k = 0; k < classes; ++k)
      sum += expf(z[k] - maximum);
    // (m − z) first, as on the CPU: adding log Σ to m first would round it away.
    loss += static_cast<double>(maximum - z[label]) + static_cast<double>(logf(sum));
    bool first = z[label] == maximum;
    for (int k = 0; k < label && first; ++k)
      first = z[k] < z[label];
    correct += first ? 1 : 0;
    if (gradient != nullptr) {
      const float scale = inverseBatch / sum;
      float* g = gradient + b * classes;
      for (std::int64_t k = 0; k < classes; ++k)
        g[k] = expf(z[k] - maximum) * scale;
      g[label] -= inverseBatch;
    }
  }
  writeBlockSums(loss, correct, sums);
}

__global__ void meanSquaredErrorKernel(const float* outputs, const float* targets,
                                       std::int64_t rows, std::int64_t count, float* gradient,
                                       LossSums* sums) {
  const float scale = 2.0f / static_cast<float>(count);
  double squares = 0;
  for (std::int64_t i = threadIdx.x; i < count; i += blockDim.x) {
    const float d = outputs[i] - targets[i];
    squares += static_cast<double>(d * d);
    if (gradient != nullptr) gradient[i] = d * scale;
  }
  writeBlockSums(squares / static_cast<double>(rows), 0, sums);
}

// out[b][c][r] = in[b][r][c]: 32×32 tiles through shared memory (padded a column against bank
// conflicts), so that both the reads and the writes are coalesced.
constexpr int kTile = 32, kTileRows = 8;
__global__ void transposeKernel(const float* in, float* out, int rows, int columns) {
  __shared__ float tile[kTile][kTile + 1];
  const std::int64_t matrix = static_cast<std::int64_t>(blockIdx.z) * rows * columns;
  const int c0 = static_cast<int>(blockIdx.x) * kTile, r0 = static_cast<int>(blockIdx.y) * kTile;
  for (int i = static_cast<int>(threadIdx.y); i < kTile; i += kTileRows) {
    const int r = r0 + i, c = c0 + static_cast<int>(threadIdx.x);
    if (r < rows && c < columns) tile[i][threadIdx.x] = in[matrix + std::int64_t{r} * columns + c];
  }
  __syncthreads();
  for (int i = static_cast<int>(threadIdx.y); i < kTile; i += kTileRows) {
    const int c = c0 + i, r = r0 + static_cast<int>(threadIdx.x);
    if (r < rows && c < columns) out[matrix + std::int64_t{c} * rows + r] = tile[threadIdx.x][i];
  }
}

}  // namespace

void addBias(float* y, const float* bias, std::int64_t rows, std::int64_t columns,
             float* reluOutput, cudaStream_t stream) {
  const std::int64_t count = rows * columns;
  withIndexType(count, [&](auto zero) {
    using I = decltype(zero);
    addBiasKernel<I><<<blocksFor(count), kThreads, 0, stream>>>(y, bias, static_cast<I>(rows),
                                                                static_cast<I>(count), reluOutput);
    RINGTRAIN_MODELS_CUDA_LAUNCHED(addBiasKernel);
  });
}

void relu(const float* x, float* y, std::int64_t count, cudaStream_t stream) {
  reluKernel<<<blocksFor(count), kThreads, 0, stream>>>(x, y, count);
  RINGTRAIN_MODELS_CUDA_LAUNCHED(reluKernel);
}

void reluBackward(const float* y, const float* dy, float* dx, std::int64_t count,
                  cudaStream_t stream) {
  reluBackwardKernel<<<blocksFor(count), kThreads, 0, stream>>>(y, dy, dx, count);
  RINGTRAIN_MODELS_CUDA_LAUNCHED(reluBackwardKernel);
}

void fill(float* values, float value, std::int64_t count, cudaStream_t stream) {
  fillKernel<<<blocksFor(count), kThreads, 0, stream>>>(values, value, count);
  RINGTRAIN_MODELS_CUDA_LAUNCHED(fillKernel);
}

std::int64_t biasPartialsCount(std::int64_t rows) {
  return kBiasBlocks * rows;
}

void biasGradient(const float* dy, std::int64_t rows, std::int64_t columns, float* db,
                  float* partials, cudaStream_t stream) {
  const std::int64_t perBlock =
      std::max(kBiasLeastColumns, (columns + kBiasBlocks - 1) / kBiasBlocks);
  const std::int64_t blocks = std::max<std::int64_t>(1, (columns + perBlock - 1) / perBlock);
  const dim3 grid(static_cast<unsigned>(blocks),
                  static_cast<unsigned>((rows + kBiasRowTile - 1) / kBiasRowTile));
  biasPartialsKernel<<<grid, dim3(kBiasRowTile, kBiasLanes), 0, stream>>>(dy, rows, columns,
                                                                          perBlock, partials);
  RINGTRAIN_MODELS_CUDA_LAUNCHED(biasPartialsKernel);
  biasTotalsKernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(partials, rows, blocks,
                                                                         db);
  RINGTRAIN_MODELS_CUDA_LAUNCHED(biasTotalsKernel);
}

void im2col(const float* x, float* columns, const ConvGeometry& g, std::int64_t batch,
            cudaStream_t stream) {
  const std::int64_t count = static_cast<std::int64_t>(g.kernel) * g.kernel * g.channels *
                             g.outHeight * g.outWidth * batch;
  withIndexType(count, [&](auto zero) {
    using I = decltype(zero);
    im2colKernel<I>
        <<<blocksFor(count), kThreads, 0, stream>>>(x, columns, g, static_cast<I>(count));
    RINGTRAIN_MODELS_CUDA_LAUNCHED(im2colKernel);
  });
}

void col2im(const float* columns, float* dx, const ConvGeometry& g, std::int64_t batch,
            cudaStream_t stream) {
  const std::int64_t count = static_cast<std::int64_t>(g.channels) * g.height * g.width * batch;
  withIndexType(count, [&](auto zero) {
    using I = decltype(zero);
    col2imKernel<I>
        <<<blocksFor(count), kThreads, 0, stream>>>(columns, dx, g, static_cast<I>(count));
    RINGTRAIN_MODELS_CUDA_LAUNCHED(col2imKernel);
  });
}

void maxPoolForward(const float* x, float* y, std::int32_t* winners, const PoolGeometry& g,
                    std::int64_t batch, cudaStream_t stream) {
  const std::int64_t count =
      static_cast<std::int64_t>(g.channels) * g.outHeight * g.outWidth * batch;
  withIndexType(count, [&](auto zero) {
    using I = decltype(zero);
    maxPoolForwardKernel<I>
        <<<blocksFor(count), kThreads, 0, stream>>>(x, y, winners, g, static_cast<I>(count));
    RINGTRAIN_MODELS_CUDA_LAUNCHED(maxPoolForwardKernel);
  });
}

void maxPoolBackward(const float* dy, const std::int32_t* winners, float* dx, const PoolGeometry& g,
                     std::int64_t batch, cudaStream_t stream) {
  const std::int64_t count = static_cast<std::int64_t>(g.channels) * g.height * g.width * batch;
  withIndexType(count, [&](auto zero) {
    using I = decltype(zero);
    maxPoolBackwardKernel<I>
        <<<blocksFor(count), kThreads, 0, stream>>>(dy, winners, dx, g, static_cast<I>(count));
    RINGTRAIN_MODELS_CUDA_LAUNCHED(maxPoolBackwardKernel);
  });
}

void transpose(const float* in, float* out, std::int64_t matrices, std::int64_t rows,
               std::int64_t columns, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((columns + kTile - 1) / kTile),
                  static_cast<unsigned>((rows + kTile - 1) / kTile),
                  static_cast<unsigned>(matrices));
  transposeKernel<<<grid, dim3(kTile, kTileRows), 0, stream>>>(in, out, static_cast<int>(rows),
                                                               static_cast<int>(columns));
  RINGTRAIN_MODELS_CUDA_LAUNCHED(transposeKernel);
}

void softmaxCrossEntropy(const float* logits, const std::int32_t* labels, std::int64_t classes,
                         std::int64_t batch, float* gradient, LossSums* sums, cudaStream_t stream) {
  softmaxCrossEntropyKernel<<<1, kLossThreads, 0, stream>>>(logits, labels, classes, batch,
                                                            gradient, sums);
  RINGTRAIN_MODELS_CUDA_LAUNCHED(softmaxCrossEntropyKernel);
}

void meanSquaredError(const float* outputs, const float* targets, std::int64_t rows,
                      std::int64_t batch, float* gradient, LossSums* sums, cudaStream_t stream) {
  meanSquaredErrorKernel<<<1, kLossThreads, 0, stream>>>(outputs, targets, rows, rows * batch,
                                                         gradient, sums);
  RINGTRAIN_MODELS_CUDA_LAUNCHED(meanSquaredErrorKernel);
}

}  // namespace ringtrain::models::cuda
