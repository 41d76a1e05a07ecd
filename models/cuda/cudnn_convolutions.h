// A GPU model's convolutions by cuDNN (GPU builds with cuDNN only: RINGTRAIN_HAVE_CUDNN), in place
// of im2col and cuBLAS: no column matrix is written, read and written back per step.
//
// The calls take the GPU model's layouts: images channels-last (NHWC), the output the
// convolution's O × (samples·pixels) matrix (which is NHWC too), the weight row-major
// O × (kh, kw, c) (cuDNN's NHWC filter). A layer runs in one of two layouts (setLayout): cuDNN on
// these buffers as they are, or on channels-first copies (NCHW images, KCRS filters) transposed
// around each call, since cuDNN's float32 kernels differ by layout (PyTorch's are NCHW); the
// caller times both. Each layer's algorithms are chosen by timing them (cuDNN's Find) for each
// batch size: with kPlain among those that sum the plain float32 products (implicit GEMM, GEMM,
// direct; not FFT or Winograd, whose transforms round differently from the CPU's products),
// deterministic ones first; with kAny among all (models/conv2d.h). TF32 only when asked for.
// Everything is enqueued on the stream given, with one workspace shared by the layers.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include <cuda_runtime_api.h>

#include "models/conv2d.h"
#include "models/cuda/layer_kernels.h"

namespace ringtrain::models::cuda {

enum class CudnnLayout { kChannelsLast, kChannelsFirst };

class CudnnConvolutions {
 public:
  CudnnConvolutions(cudaStream_t stream, bool tf32,
                    ConvolutionAlgorithms algorithms = ConvolutionAlgorithms::kPlain);
  ~CudnnConvolutions();
  CudnnConvolutions(const CudnnConvolutions&) = delete;
  CudnnConvolutions& operator=(const CudnnConvolutions&) = delete;

  // Registers a convolution (channels-last input) and returns its index; `name` is for messages.
  int add(const std::string& name, const ConvGeometry& geometry, int outChannels,
          bool needsInputGradient);
  // Chooses the layer's algorithms for `batch` samples in both layouts and grows the workspace
  // and the channels-first copies (synchronises the stream; runs each candidate). Returns "" or,
  // when cuDNN offers no algorithm for either layout, why (the caller then keeps its own path
  // for that layer). Other batch sizes are planned on first use.
  std::string reserve(int layer, int batch);
  // Whether reserve() found algorithms for the layer at `batch` in `layout`.
  bool usable(int layer, int batch, CudnnLayout layout) const;
  // The layout the calls below run the layer in (at first channels-last).
  void setLayout(int layer, CudnnLayout layout);
  // "channels-first: forward IMPLICIT_PRECOMP_GEMM (fma), filter ALGO_1, data ALGO_1", for logs.
  std::string chosen(int layer, int batch) const;

  // y = conv(x, weight), for any batch size (a new one is planned first). The bias is the
  // caller's: cuDNN's bias kernels ran on 4 blocks of an H200 (3 ms a step at batch 1024).
  void forward(int layer, const float* x, const float* weight, float* y, int batch);
  // The weight's gradient (overwritten) from x and dy.
  void backwardWeight(int layer, const float* x, const float* dy, float* weightGradient, int batch);
  // dx (overwritten) from dy and the weight.
  void backwardInput(int layer, const float* weight, const float* dy, float* dx, int batch);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

std::string cudnnVersion();  // of the library loaded, e.g. "9.10.2"

}  // namespace ringtrain::models::cuda
