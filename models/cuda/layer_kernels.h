// The model's own CUDA kernels (everything but the matrix products, which are cuBLAS's), as
// plain functions that enqueue one kernel on `stream` and return at once. Layouts are those of
// the CPU layers (models/*.cc): batches are features × samples, column-major; convolutions and
// pools after the first layer are channels-last.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

namespace ringtrain::models::cuda {

// A convolution's geometry, as models/conv2d.cc's FieldGeometry. im2col's K×N matrix has one
// column per field (sample, output row, output column) and rows in (i, j, c) order.
struct ConvGeometry {
  int channels, height, width;
  int kernel, stride, padding;
  int outHeight, outWidth;
  bool channelsFirst;  // input layout (only a model's first layer)
};

// Max-pooling over channels-last samples; windows past the bottom/right edge are dropped.
struct PoolGeometry {
  int channels, height, width;
  int kernel, stride;
  int outHeight, outWidth;
};

// Sums over a batch, written by the loss kernels (one block each, so they are deterministic).
struct LossSums {
  double loss;
  long long correct;
};

// y (rows × columns) += bias per row; with reluOutput also reluOutput = max(y, 0) (NaN passes).
void addBias(float* y, const float* bias, std::int64_t rows, std::int64_t columns,
             float* reluOutput, cudaStream_t stream);
void relu(const float* x, float* y, std::int64_t count, cudaStream_t stream);
// dx = y > 0 ? dy : 0 (y is the ReLU's output).
void reluBackward(const float* y, const float* dy, float* dx, std::int64_t count,
                  cudaStream_t stream);
void fill(float* values, float value, std::int64_t count, cudaStream_t stream);

// db[r] = Σ_j dy[r + rows·j] over the columns, the same sums every run (no atomics): blocks
// write partial sums per row to `partials` (biasPartialsCount(rows) floats), then one pass adds
// them in order. For a convolution's many columns of few rows, where a matrix-vector product
// gets few blocks.
void biasGradient(const float* dy, std::int64_t rows, std::int64_t columns, float* db,
                  float* partials, cudaStream_t stream);
std::int64_t biasPartialsCount(std::int64_t rows);

void im2col(const float* x, float* columns, const ConvGeometry& g, std::int64_t batch,
            cudaStream_t stream);
// dx = the sum, for each input value, of the column entries that read it (overwrites dx).
void col2im(const float* columns, float* dx, const ConvGeometry& g, std::int64_t batch,
            cudaStream_t stream);

// winners: per output value, the index within its sample of the input that won (first maximum).
void maxPoolForward(const float* x, float* y, std::int32_t* winners, const PoolGeometry& g,
                    std::int64_t batch, cudaStream_t stream);
// Overwrites dx.
void maxPoolBackward(const float* dy, const std::int32_t* winners, float* dx, const PoolGeometry& g,
                     std::int64_t batch, cudaStream_t stream);

// out[m] = in[m]ᵀ for `matrices` row-major rows × columns matrices after one another (matrices
// up to 65,535; rows, columns and a matrix's size under 2³¹): NHWC <-> NCHW, KRSC <-> KCRS.
void transpose(const float* in, float* out, std::int64_t matrices, std::int64_t rows,
               std::int64_t columns, cudaStream_t stream);

// Per sample (m − z_label) + log Σ exp(z − m); gradient (may be null) (softmax − onehot)/B.
void softmaxCrossEntropy(const float* logits, const std::int32_t* labels, std::int64_t classes,
                         std::int64_t batch, float* gradient, LossSums* sums, cudaStream_t stream);
// loss = Σ (y − t)² / rows; gradient (may be null) 2 (y − t) / (rows · batch).
void meanSquaredError(const float* outputs, const float* targets, std::int64_t rows,
                      std::int64_t batch, float* gradient, LossSums* sums, cudaStream_t stream);

}  // namespace ringtrain::models::cuda
