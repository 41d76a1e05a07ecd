// float32 2-D convolutions by oneDNN's direct kernels (built with oneDNN only: RINGTRAIN_ONEDNN).
//
// They multiply only the taps that fall inside the image, where im2col's products also multiply
// the padding's zeros, and run in the CPU's widest vectors, chosen by oneDNN at run time. On the
// CNN's shapes they take the convolutions' time to about 0.6 of im2col and OpenBLAS's (see
// docs/performance.md, CNN). Results agree with im2col's within float32 reassociation.
//
// Layouts are Conv2d's: the input channels-last or channels-first per sample, samples one after
// another; the output and its gradient channels-last; the weight {O, kernel, kernel, C} row-major.
// One thread: a rank's work stays on its core (oneDNN's OpenMP runtime is held to one thread).
#pragma once

#include <memory>

#include "models/tensor.h"

namespace ringtrain::models {

struct DirectConvolutionShape {
  Index inChannels = 1, height = 1, width = 1;
  Index outChannels = 1, kernel = 1, stride = 1, padding = 0;
  bool inputChannelsFirst = false;
};

class DirectConvolution {
 public:
  explicit DirectConvolution(const DirectConvolutionShape& shape);
  ~DirectConvolution();
  DirectConvolution(const DirectConvolution&) = delete;
  DirectConvolution& operator=(const DirectConvolution&) = delete;

  // y = conv(x, weight) + bias for `batch` samples.
  void forward(const float* x, const float* weight, const float* bias, float* y, Index batch);
  // The weight's and the bias's gradients (overwritten) from the input and the output's gradient.
  void backwardParameters(const float* x, const float* dy, float* dWeight, float* dBias,
                          Index batch);
  // The input's gradient (overwritten).
  void backwardInput(const float* dy, const float* weight, float* dx, Index batch);

 private:
  struct Primitives;
  // The primitives for `batch` samples (made again when the batch changes).
  Primitives& primitivesFor(Index batch);

  DirectConvolutionShape shape_;
  std::unique_ptr<Primitives> primitives_;
};

}  // namespace ringtrain::models
