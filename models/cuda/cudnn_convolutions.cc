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

// The fastest result (Find sorts them by time) that succeeded; with kPlain one that sums plain
// products, a deterministic one where there is one. A rank's own sums may differ from run to
// run, but never between ranks, which all step with the same averaged gradient.
template <class Algo, class Perf>
Choice<Algo> pick(const Perf* results, int count, ConvolutionAlgorithms algorithms) {
  const bool any = algorithms == ConvolutionAlgorithms::kAny;
  for (const bool deterministic : {!any, false}) {
    for (int i = 0; i < count; ++i) {
      const Perf& r = results[i];
      if (r.status == CUDNN_STATUS_SUCCESS && (any || plainProducts(r.algo)) &&
          (!deterministic || r.determinism == CUDNN_DETERMINISTIC))
        return {r.algo, r.mathType, r.memory, true, r.determinism == CUDNN_DETERMINISTIC};
    }
  }
  return {};
}

constexpr int kCandidates = 8;

int indexOf(CudnnLayout layout) {
  return layout == CudnnLayout::kChannelsLast ? 0 : 1;
}
cudnnTensorFormat_t formatOf(CudnnLayout layout) {
  return layout == CudnnLayout::kChannelsLast ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
}
const char* layoutName(CudnnLayout layout) {
  return layout == CudnnLayout::kChannelsLast ? "channels-last" : "channels-first";
}
constexpr CudnnLayout kLayouts[] = {CudnnLayout::kChannelsLast, CudnnLayout::kChannelsFirst};

// A layer's descriptors for one batch size and layout, and the algorithms chosen for them.
struct Plan {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  Choice<cudnnConvolutionFwdAlgo_t> forward;
  Choice<cudnnConvolutionBwdDataAlgo_t> data;
  Choice<cudnnConvolutionBwdFilterAlgo_t> filter;
  bool usable() const { return forward.found && filter.found && data.found; }
};

// Device memory that grows to the largest count asked for (synchronising the stream first: the
// old buffer may be in use).
struct Scratch {
  float* data = nullptr;
  std::size_t count = 0;
  void grow(std::size_t wanted, cudaStream_t stream) {
    if (wanted <= count) return;
    RINGTRAIN_MODELS_CUDA_CHECK(cudaStreamSynchronize(stream));
    RINGTRAIN_MODELS_CUDA_CHECK(cudaFree(data));
    data = nullptr;
    count = 0;
    RINGTRAIN_MODELS_CUDA_CHECK(
        cudaMalloc(reinterpret_cast<void**>(&data), wanted * sizeof(float)));
    count = wanted;
  }
};

struct Layer {
  std::string name;
  ConvGeometry g{};
  int outChannels = 0;
  bool needsInput = false;
  CudnnLayout layout = CudnnLayout::kChannelsLast;
  cudnnFilterDescriptor_t w[2] = {};  // by layout: KRSC, KCRS
  cudnnConvolutionDescriptor_t conv = nullptr;
  std::map<std::pair<int, CudnnLayout>, Plan> plans;  // by batch size and layout
  // Channels-first: the input or its gradient, the output or its gradient, the weight or its
  // gradient, transposed.
  Scratch input, output, weight;

  std::size_t pixels() const { return static_cast<std::size_t>(g.height) * g.width; }
  std::size_t outPixels() const { return static_cast<std::size_t>(g.outHeight) * g.outWidth; }
  std::size_t taps() const { return static_cast<std::size_t>(g.kernel) * g.kernel; }
  bool channelsFirst() const { return layout == CudnnLayout::kChannelsFirst; }

  // The model's buffers to the channels-first copies (NHWC: N × pixels × C to N × C × pixels;
  // KRSC: O × taps × C to O × C × taps), and the copies' results back.
  const float* inputFirst(const float* x, int batch, cudaStream_t s) {
    transpose(x, input.data, batch, pixels(), g.channels, s);
    return input.data;
  }
  const float* outputFirst(const float* dy, int batch, cudaStream_t s) {
    transpose(dy, output.data, batch, outPixels(), outChannels, s);
    return output.data;
  }
  const float* weightFirst(const float* krsc, cudaStream_t s) {
    transpose(krsc, weight.data, outChannels, taps(), g.channels, s);
    return weight.data;
  }
  void inputBack(float* dx, int batch, cudaStream_t s) {
    transpose(input.data, dx, batch, g.channels, pixels(), s);
  }
  void outputBack(float* y, int batch, cudaStream_t s) {
    transpose(output.data, y, batch, outChannels, outPixels(), s);
  }
  void weightBack(float* dw, cudaStream_t s) {
    transpose(weight.data, dw, outChannels, g.channels, taps(), s);
  }
};

std::string unusable(const Layer& layer, int batch) {
  return layer.name + ": cuDNN offers no algorithm allowed for batch " + std::to_string(batch);
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
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT:
      return "FFT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING:
      return "FFT_TILING";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD:
      return "WINOGRAD";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED:
      return "WINOGRAD_NONFUSED";
    default:
      return "other";
  }
}

}  // namespace

struct CudnnConvolutions::Impl {
  cudaStream_t stream = nullptr;
  cudnnMathType_t math = CUDNN_FMA_MATH;
  ConvolutionAlgorithms algorithms = ConvolutionAlgorithms::kPlain;
  cudnnHandle_t handle = nullptr;
  std::vector<Layer> layers;
  void* workspace = nullptr;
  std::size_t workspaceBytes = 0;

  ~Impl() {
    if (stream != nullptr) cudaStreamSynchronize(stream);
    for (Layer& layer : layers) {
      for (auto& [key, plan] : layer.plans) {
        cudnnDestroyTensorDescriptor(plan.x);
        cudnnDestroyTensorDescriptor(plan.y);
      }
      for (cudnnFilterDescriptor_t w : layer.w)
        cudnnDestroyFilterDescriptor(w);
      cudnnDestroyConvolutionDescriptor(layer.conv);
      for (Scratch* scratch : {&layer.input, &layer.output, &layer.weight})
        cudaFree(scratch->data);
    }
    cudaFree(workspace);
    if (handle != nullptr) cudnnDestroy(handle);
  }

  // The plan for `batch` in `layout`, made (and timed: synchronises) on first use; "" or why
  // none exists.
  std::string plan(Layer& layer, int batch, CudnnLayout layout);
  void find(const Layer& layer, Plan& p, CudnnLayout layout);
  void growWorkspace(std::size_t bytes);
  // The layer's plan in its layout for `batch`; a channels-first layer's copies grown to it.
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

std::string CudnnConvolutions::Impl::plan(Layer& layer, int batch, CudnnLayout layout) {
  const auto key = std::make_pair(batch, layout);
  if (const auto known = layer.plans.find(key); known != layer.plans.end())
    return known->second.usable() ? "" : unusable(layer, batch);
  const ConvGeometry& g = layer.g;
  Plan p;
  RINGTRAIN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&p.x));
  RINGTRAIN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&p.y));
  layer.plans[key] = p;  // owned from here on, also if a check below throws
  const cudnnFilterDescriptor_t w = layer.w[indexOf(layout)];
  RINGTRAIN_CUDNN_CHECK(cudnnSetTensor4dDescriptor(p.x, formatOf(layout), CUDNN_DATA_FLOAT, batch,
                                                   g.channels, g.height, g.width));
  int n = 0, c = 0, h = 0, width = 0;
  RINGTRAIN_CUDNN_CHECK(
      cudnnGetConvolution2dForwardOutputDim(layer.conv, p.x, w, &n, &c, &h, &width));
  if (c != layer.outChannels || h != g.outHeight || width != g.outWidth)
    return layer.name + ": cuDNN's output " + std::to_string(h) + "x" + std::to_string(width) +
           " differs from the layer's " + std::to_string(g.outHeight) + "x" +
           std::to_string(g.outWidth);
  RINGTRAIN_CUDNN_CHECK(cudnnSetTensor4dDescriptor(p.y, formatOf(layout), CUDNN_DATA_FLOAT, batch,
                                                   layer.outChannels, g.outHeight, g.outWidth));
  find(layer, p, layout);
  layer.plans[key] = p;
  if (!p.usable()) return unusable(layer, batch);
  growWorkspace(std::max({p.forward.workspace, p.filter.workspace, p.data.workspace}));
  return "";
}

// cuDNN's Find for each direction (it times the algorithms on buffers of its own).
void CudnnConvolutions::Impl::find(const Layer& layer, Plan& p, CudnnLayout layout) {
  const cudnnFilterDescriptor_t w = layer.w[indexOf(layout)];
  RINGTRAIN_CUDNN_CHECK(cudnnSetConvolutionMathType(layer.conv, math));
  int count = 0;
  std::array<cudnnConvolutionFwdAlgoPerf_t, kCandidates> forward{};
  RINGTRAIN_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithm(handle, p.x, w, layer.conv, p.y,
                                                             kCandidates, &count, forward.data()));
  p.forward = pick<cudnnConvolutionFwdAlgo_t>(forward.data(), count, algorithms);
  std::array<cudnnConvolutionBwdFilterAlgoPerf_t, kCandidates> filter{};
  RINGTRAIN_CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithm(
      handle, p.x, p.y, layer.conv, w, kCandidates, &count, filter.data()));
  p.filter = pick<cudnnConvolutionBwdFilterAlgo_t>(filter.data(), count, algorithms);
  p.data.found = true;
  if (layer.needsInput) {
    std::array<cudnnConvolutionBwdDataAlgoPerf_t, kCandidates> data{};
    RINGTRAIN_CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithm(
        handle, w, p.y, layer.conv, p.x, kCandidates, &count, data.data()));
    p.data = pick<cudnnConvolutionBwdDataAlgo_t>(data.data(), count, algorithms);
  }
}

const Plan& CudnnConvolutions::Impl::planned(int index, int batch) {
  Layer& layer = layers.at(static_cast<std::size_t>(index));
  if (const std::string why = plan(layer, batch, layer.layout); !why.empty())
    throw std::runtime_error(why);
  if (layer.layout == CudnnLayout::kChannelsFirst) {
    const auto samples = static_cast<std::size_t>(batch);
    layer.input.grow(samples * layer.pixels() * static_cast<std::size_t>(layer.g.channels), stream);
    layer.output.grow(samples * layer.outPixels() * static_cast<std::size_t>(layer.outChannels),
                      stream);
    layer.weight.grow(static_cast<std::size_t>(layer.outChannels) * layer.taps() *
                          static_cast<std::size_t>(layer.g.channels),
                      stream);
  }
  return layer.plans.at({batch, layer.layout});
}

CudnnConvolutions::CudnnConvolutions(cudaStream_t stream, bool tf32,
                                     ConvolutionAlgorithms algorithms)
    : impl_(std::make_unique<Impl>()) {
  impl_->stream = stream;
  impl_->algorithms = algorithms;
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
  for (const CudnnLayout layout : kLayouts) {
    cudnnFilterDescriptor_t& w = layer.w[indexOf(layout)];
    RINGTRAIN_CUDNN_CHECK(cudnnCreateFilterDescriptor(&w));
    RINGTRAIN_CUDNN_CHECK(cudnnSetFilter4dDescriptor(w, CUDNN_DATA_FLOAT, formatOf(layout),
                                                     outChannels, g.channels, g.kernel, g.kernel));
  }
  RINGTRAIN_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&layer.conv));
  RINGTRAIN_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(layer.conv, g.padding, g.padding, g.stride,
                                                        g.stride, 1, 1, CUDNN_CROSS_CORRELATION,
                                                        CUDNN_DATA_FLOAT));
  return static_cast<int>(impl_->layers.size()) - 1;
}

std::string CudnnConvolutions::reserve(int index, int batch) {
  Layer& layer = impl_->layers.at(static_cast<std::size_t>(index));
  std::string why;
  bool any = false;
  for (const CudnnLayout layout : kLayouts) {  // every layout planned: the caller times them
    const std::string problem = impl_->plan(layer, batch, layout);
    any = any || problem.empty();
    if (!problem.empty()) why = problem;
  }
  return any ? "" : why;
}

bool CudnnConvolutions::usable(int index, int batch, CudnnLayout layout) const {
  const Layer& layer = impl_->layers.at(static_cast<std::size_t>(index));
  const auto p = layer.plans.find({batch, layout});
  return p != layer.plans.end() && p->second.usable();
}

void CudnnConvolutions::setLayout(int index, CudnnLayout layout) {
  impl_->layers.at(static_cast<std::size_t>(index)).layout = layout;
}

std::string CudnnConvolutions::chosen(int index, int batch) const {
  const Layer& layer = impl_->layers.at(static_cast<std::size_t>(index));
  const auto p = layer.plans.find({batch, layer.layout});
  if (p == layer.plans.end() || !p->second.forward.found) return "no algorithm";
  const auto math = [](cudnnMathType_t m) { return m == CUDNN_FMA_MATH ? "fma" : "tensor-op"; };
  const Plan& plan = p->second;
  const auto nondeterministic = [](bool deterministic) {
    return deterministic ? "" : " (nondeterministic)";
  };
  std::string text = std::string(layoutName(layer.layout)) + ": forward " +
                     forwardName(plan.forward.algo) + " (" + math(plan.forward.math) +
                     "), filter ALGO_" + std::to_string(static_cast<int>(plan.filter.algo)) +
                     nondeterministic(plan.filter.deterministic);
  if (layer.needsInput)
    text += ", data ALGO_" + std::to_string(static_cast<int>(plan.data.algo)) +
            nondeterministic(plan.data.deterministic);
  return text;
}

// A channels-first layer's calls run on its copies: the model's buffers transposed before cuDNN
// runs, its results back after.
void CudnnConvolutions::forward(int index, const float* x, const float* weight, float* y,
                                int batch) {
  const Plan& p = impl_->planned(index, batch);
  Layer& layer = impl_->layers[static_cast<std::size_t>(index)];
  const cudaStream_t s = impl_->stream;
  const bool first = layer.channelsFirst();
  if (first) {
    x = layer.inputFirst(x, batch, s);
    weight = layer.weightFirst(weight, s);
  }
  const float one = 1.0f, zero = 0.0f;
  RINGTRAIN_CUDNN_CHECK(cudnnSetConvolutionMathType(layer.conv, p.forward.math));
  RINGTRAIN_CUDNN_CHECK(
      cudnnConvolutionForward(impl_->handle, &one, p.x, x, layer.w[indexOf(layer.layout)], weight,
                              layer.conv, p.forward.algo, impl_->workspace, impl_->workspaceBytes,
                              &zero, p.y, first ? layer.output.data : y));
  if (first) layer.outputBack(y, batch, s);
}

void CudnnConvolutions::backwardWeight(int index, const float* x, const float* dy,
                                       float* weightGradient, int batch) {
  const Plan& p = impl_->planned(index, batch);
  Layer& layer = impl_->layers[static_cast<std::size_t>(index)];
  const cudaStream_t s = impl_->stream;
  const bool first = layer.channelsFirst();
  if (first) {
    x = layer.inputFirst(x, batch, s);
    dy = layer.outputFirst(dy, batch, s);
  }
  const float one = 1.0f, zero = 0.0f;
  RINGTRAIN_CUDNN_CHECK(cudnnSetConvolutionMathType(layer.conv, p.filter.math));
  RINGTRAIN_CUDNN_CHECK(cudnnConvolutionBackwardFilter(
      impl_->handle, &one, p.x, x, p.y, dy, layer.conv, p.filter.algo, impl_->workspace,
      impl_->workspaceBytes, &zero, layer.w[indexOf(layer.layout)],
      first ? layer.weight.data : weightGradient));
  if (first) layer.weightBack(weightGradient, s);
}

void CudnnConvolutions::backwardInput(int index, const float* weight, const float* dy, float* dx,
                                      int batch) {
  const Plan& p = impl_->planned(index, batch);
  Layer& layer = impl_->layers[static_cast<std::size_t>(index)];
  const cudaStream_t s = impl_->stream;
  const bool first = layer.channelsFirst();
  if (first) {
    weight = layer.weightFirst(weight, s);
    dy = layer.outputFirst(dy, batch, s);
  }
  const float one = 1.0f, zero = 0.0f;
  RINGTRAIN_CUDNN_CHECK(cudnnSetConvolutionMathType(layer.conv, p.data.math));
  RINGTRAIN_CUDNN_CHECK(cudnnConvolutionBackwardData(
      impl_->handle, &one, layer.w[indexOf(layer.layout)], weight, p.y, dy, layer.conv, p.data.algo,
      impl_->workspace, impl_->workspaceBytes, &zero, p.x, first ? layer.input.data : dx));
  if (first) layer.inputBack(dx, batch, s);
}

std::string cudnnVersion() {
  // cuDNN 9 counts major·10000 + minor·100 + patch; 8 counted major·1000.
  const std::size_t v = cudnnGetVersion();
  const std::size_t major = v >= 90000 ? v / 10000 : v / 1000;
  return std::to_string(major) + "." + std::to_string(v / 100 % 100) + "." +
         std::to_string(v % 100);
}

}  // namespace ringtrain::models::cuda
