#include "models/cuda/cudnn_convolutions.h"

#include <cudnn.h>

#include <algorithm>
#include <array>
#include <map>
#include <stdexcept>
#include <utility>
#include <vector>

#include "models/cuda/cuda_errors.h"

namespace ringtrain::models::cuda {
namespace {

void checkCudnn(cudnnStatus_t rc, const char* call, const char* file, int line) {
  if (rc != CUDNN_STATUS_SUCCESS) throwCudaFailure(call, cudnnGetErrorString(rc), file, line);
}
#define RINGTRAIN_CUDNN_CHECK(call) checkCudnn((call), #call, __FILE__, __LINE__)

// The algorithms that sum the plain float32 products, as the CPU's convolutions do.
bool plainProducts(cudnnConvolutionFwdAlgo_t a) {
  return a == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM ||
         a == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM ||
         a == CUDNN_CONVOLUTION_FWD_ALGO_GEMM || a == CUDNN_CONVOLUTION_FWD_ALGO_DIRECT;
}
bool plainProducts(cudnnConvolutionBwdDataAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_0 || a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
}
bool plainProducts(cudnnConvolutionBwdFilterAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 || a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1 ||
         a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3;
}

// One direction's choice: the algorithm, the math type it was timed with, its workspace.
template <class Algo>
struct Choice {
  Algo algo{};
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  std::size_t workspace = 0;
  bool found = false;
  bool deterministic = true;
};

// The fastest result (Find sorts them by time) that succeeded and sums plain products, a
// deterministic one where there is one: a rank's own sums may then differ from run to run, but
// never between ranks, which all step with the same averaged gradient.
template <class Algo, class Perf>
Choice<Algo> pick(const Perf* results, int count) {
  for (const bool deterministic : {true, false}) {
    for (int i = 0; i < count; ++i) {
      const Perf& r = results[i];
      if (r.status == CUDNN_STATUS_SUCCESS && plainProducts(r.algo) &&
          (!deterministic || r.determinism == CUDNN_DETERMINISTIC))
        return {r.algo, r.mathType, r.memory, true, r.determinism == CUDNN_DETERMINISTIC};
    }
  }
  return {};
}

constexpr int kCandidates = 8;

// A layer's descriptors for one batch size and the algorithms chosen for it.
struct Plan {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  Choice<cudnnConvolutionFwdAlgo_t> forward;
  Choice<cudnnConvolutionBwdDataAlgo_t> data;
  Choice<cudnnConvolutionBwdFilterAlgo_t> filter;
};

struct Layer {
  std::string name;
  ConvGeometry g{};
  int outChannels = 0;
  bool needsInput = false;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  std::map<int, Plan> plans;  // by batch size
};

std::string unusable(const Layer& layer, int batch) {
  return layer.name + ": cuDNN offers no plain-product algorithm for batch " +
         std::to_string(batch);
}

const char* forwardName(cudnnConvolutionFwdAlgo_t a) {
  switch (a) {
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM:
      return "IMPLICIT_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM:
      return "IMPLICIT_PRECOMP_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM:
      return "GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_DIRECT:
      return "DIRECT";
    default:
      return "other";
  }
}

}  // namespace

struct CudnnConvolutions::Impl {
  cudaStream_t stream = nullptr;
  cudnnMathType_t math = CUDNN_FMA_MATH;
  cudnnHandle_t handle = nullptr;
  std::vector<Layer> layers;
  void* workspace = nullptr;
  std::size_t workspaceBytes = 0;

  ~Impl() {
    if (stream != nullptr) cudaStreamSynchronize(stream);
    for (Layer& layer : layers) {
      for (auto& [batch, plan] : layer.plans) {
        cudnnDestroyTensorDescriptor(plan.x);
        cudnnDestroyTensorDescriptor(plan.y);
      }
      cudnnDestroyFilterDescriptor(layer.w);
      cudnnDestroyConvolutionDescriptor(layer.conv);
    }
    cudaFree(workspace);
    if (handle != nullptr) cudnnDestroy(handle);
  }

  // The plan for `batch`, made (and timed: synchronises) on first use; "" or why none exists.
  std::string plan(Layer& layer, int batch);
  void growWorkspace(std::size_t bytes);
  const Plan& planned(int index, int batch);
};

void CudnnConvolutions::Impl::growWorkspace(std::size_t bytes) {
  if (bytes <= workspaceBytes) return;
  RINGTRAIN_MODELS_CUDA_CHECK(cudaStreamSynchronize(stream));  // the old one may be in use
  RINGTRAIN_MODELS_CUDA_CHECK(cudaFree(workspace));
  workspace = nullptr;
  workspaceBytes = 0;
  RINGTRAIN_MODELS_CUDA_CHECK(cudaMalloc(&workspace, bytes));
  workspaceBytes = bytes;
}

std::string CudnnConvolutions::Impl::plan(Layer& layer, int batch) {
  if (const auto known = layer.plans.find(batch); known != layer.plans.end()) {
    const Plan& p = known->second;
    return p.forward.found && p.filter.found && p.data.found ? "" : unusable(layer, batch);
  }
  const ConvGeometry& g = layer.g;
  Plan p;
  RINGTRAIN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&p.x));
  RINGTRAIN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&p.y));
  layer.plans[batch] = p;  // owned from here on, also if a check below throws
  RINGTRAIN_CUDNN_CHECK(cudnnSetTensor4dDescriptor(p.x, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, batch,
                                                   g.channels, g.height, g.width));
  int n = 0, c = 0, h = 0, w = 0;
  RINGTRAIN_CUDNN_CHECK(
      cudnnGetConvolution2dForwardOutputDim(layer.conv, p.x, layer.w, &n, &c, &h, &w));
  if (c != layer.outChannels || h != g.outHeight || w != g.outWidth)
    return layer.name + ": cuDNN's output " + std::to_string(h) + "x" + std::to_string(w) +
           " differs from the layer's " + std::to_string(g.outHeight) + "x" +
           std::to_string(g.outWidth);
  RINGTRAIN_CUDNN_CHECK(cudnnSetTensor4dDescriptor(p.y, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, batch,
                                                   layer.outChannels, g.outHeight, g.outWidth));
  RINGTRAIN_CUDNN_CHECK(cudnnSetConvolutionMathType(layer.conv, math));
  int count = 0;
  std::array<cudnnConvolutionFwdAlgoPerf_t, kCandidates> forward{};
  RINGTRAIN_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithm(handle, p.x, layer.w, layer.conv, p.y,
                                                             kCandidates, &count, forward.data()));
  p.forward = pick<cudnnConvolutionFwdAlgo_t>(forward.data(), count);
  std::array<cudnnConvolutionBwdFilterAlgoPerf_t, kCandidates> filter{};
  RINGTRAIN_CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithm(
      handle, p.x, p.y, layer.conv, layer.w, kCandidates, &count, filter.data()));
  p.filter = pick<cudnnConvolutionBwdFilterAlgo_t>(filter.data(), count);
  p.data.found = true;
  if (layer.needsInput) {
    std::array<cudnnConvolutionBwdDataAlgoPerf_t, kCandidates> data{};
    RINGTRAIN_CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithm(
        handle, layer.w, p.y, layer.conv, p.x, kCandidates, &count, data.data()));
    p.data = pick<cudnnConvolutionBwdDataAlgo_t>(data.data(), count);
  }
  layer.plans[batch] = p;
  if (!p.forward.found || !p.filter.found || !p.data.found) return unusable(layer, batch);
  growWorkspace(std::max({p.forward.workspace, p.filter.workspace, p.data.workspace}));
  return "";
}

const Plan& CudnnConvolutions::Impl::planned(int index, int batch) {
  Layer& layer = layers.at(static_cast<std::size_t>(index));
  if (const std::string why = plan(layer, batch); !why.empty()) throw std::runtime_error(why);
  return layer.plans.at(batch);
}

CudnnConvolutions::CudnnConvolutions(cudaStream_t stream, bool tf32)
    : impl_(std::make_unique<Impl>()) {
  impl_->stream = stream;
  // PyTorch's rule: float32 convolutions on FMA units only, unless TF32 is allowed.
  impl_->math = tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
  RINGTRAIN_CUDNN_CHECK(cudnnCreate(&impl_->handle));
  RINGTRAIN_CUDNN_CHECK(cudnnSetStream(impl_->handle, stream));
}

CudnnConvolutions::~CudnnConvolutions() = default;

int CudnnConvolutions::add(const std::string& name, const ConvGeometry& g, int outChannels,
                           bool needsInputGradient) {
  if (g.channelsFirst)
    throw std::invalid_argument(name + ": cuDNN path takes channels-last inputs only");
  Layer& layer = impl_->layers.emplace_back();
  layer.name = name;
  layer.g = g;
  layer.outChannels = outChannels;
  layer.needsInput = needsInputGradient;
  RINGTRAIN_CUDNN_CHECK(cudnnCreateFilterDescriptor(&layer.w));
  RINGTRAIN_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&layer.conv));
  RINGTRAIN_CUDNN_CHECK(cudnnSetFilter4dDescriptor(layer.w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC,
                                                   outChannels, g.channels, g.kernel, g.kernel));
  RINGTRAIN_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(layer.conv, g.padding, g.padding, g.stride,
                                                        g.stride, 1, 1, CUDNN_CROSS_CORRELATION,
                                                        CUDNN_DATA_FLOAT));
  return static_cast<int>(impl_->layers.size()) - 1;
}

std::string CudnnConvolutions::reserve(int index, int batch) {
  return impl_->plan(impl_->layers.at(static_cast<std::size_t>(index)), batch);
}

std::string CudnnConvolutions::chosen(int index, int batch) const {
  const Layer& layer = impl_->layers.at(static_cast<std::size_t>(index));
  const auto p = layer.plans.find(batch);
  if (p == layer.plans.end() || !p->second.forward.found) return "no algorithm";
  const auto math = [](cudnnMathType_t m) { return m == CUDNN_FMA_MATH ? "fma" : "tensor-op"; };
  const Plan& plan = p->second;
  const auto nondeterministic = [](bool deterministic) {
    return deterministic ? "" : " (nondeterministic)";
  };
  std::string text = std::string("forward ") + forwardName(plan.forward.algo) + " (" +
                     math(plan.forward.math) + "), filter ALGO_" +
                     std::to_string(static_cast<int>(plan.filter.algo)) +
                     nondeterministic(plan.filter.deterministic);
  if (layer.needsInput)
    text += ", data ALGO_" + std::to_string(static_cast<int>(plan.data.algo)) +
            nondeterministic(plan.data.deterministic);
  return text;
}

void CudnnConvolutions::forward(int index, const float* x, const float* weight, float* y,
                                int batch) {
  const Plan& p = impl_->planned(index, batch);
  const Layer& layer = impl_->layers[static_cast<std::size_t>(index)];
  const float one = 1.0f, zero = 0.0f;
  RINGTRAIN_CUDNN_CHECK(cudnnSetConvolutionMathType(layer.conv, p.forward.math));
  RINGTRAIN_CUDNN_CHECK(cudnnConvolutionForward(impl_->handle, &one, p.x, x, layer.w, weight,
                                                layer.conv, p.forward.algo, impl_->workspace,
                                                impl_->workspaceBytes, &zero, p.y, y));
}

void CudnnConvolutions::backwardWeight(int index, const float* x, const float* dy,
                                       float* weightGradient, int batch) {
  const Plan& p = impl_->planned(index, batch);
  const Layer& layer = impl_->layers[static_cast<std::size_t>(index)];
  const float one = 1.0f, zero = 0.0f;
  RINGTRAIN_CUDNN_CHECK(cudnnSetConvolutionMathType(layer.conv, p.filter.math));
  RINGTRAIN_CUDNN_CHECK(cudnnConvolutionBackwardFilter(
      impl_->handle, &one, p.x, x, p.y, dy, layer.conv, p.filter.algo, impl_->workspace,
      impl_->workspaceBytes, &zero, layer.w, weightGradient));
}

void CudnnConvolutions::backwardInput(int index, const float* weight, const float* dy, float* dx,
                                      int batch) {
  const Plan& p = impl_->planned(index, batch);
  const Layer& layer = impl_->layers[static_cast<std::size_t>(index)];
  const float one = 1.0f, zero = 0.0f;
  RINGTRAIN_CUDNN_CHECK(cudnnSetConvolutionMathType(layer.conv, p.data.math));
  RINGTRAIN_CUDNN_CHECK(cudnnConvolutionBackwardData(impl_->handle, &one, layer.w, weight, p.y, dy,
                                                     layer.conv, p.data.algo, impl_->workspace,
                                                     impl_->workspaceBytes, &zero, p.x, dx));
}

std::string cudnnVersion() {
  // cuDNN 9 counts major·10000 + minor·100 + patch; 8 counted major·1000.
  const std::size_t v = cudnnGetVersion();
  const std::size_t major = v >= 90000 ? v / 10000 : v / 1000;
  return std::to_string(major) + "." + std::to_string(v / 100 % 100) + "." +
         std::to_string(v % 100);
}

}  // namespace ringtrain::models::cuda
