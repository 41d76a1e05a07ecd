#include "models/cuda/gpu_model.h"

#include <cublas_v2.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <memory_resource>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "models/conv2d.h"
#include "models/cuda/cuda_errors.h"
#if RINGTRAIN_HAVE_CUDNN
#include "models/cuda/cudnn_convolutions.h"
#endif
#include "models/cuda/layer_kernels.h"
#include "models/max_pool2d.h"
#include "models/softmax_cross_entropy.h"

namespace ringtrain::models::cuda {
namespace {

enum class Kind { kLinear, kRelu, kConv2d, kMaxPool2d, kFlatten };

// The ways a convolution runs on the GPU (ConvolutionPath says which are tried), as logs name them.
enum class ConvolutionWay { kIm2col, kCudnnChannelsLast, kCudnnChannelsFirst };
constexpr ConvolutionWay kConvolutionWays[] = {ConvolutionWay::kIm2col,
                                               ConvolutionWay::kCudnnChannelsLast,
                                               ConvolutionWay::kCudnnChannelsFirst};
constexpr const char* kWayNames[] = {"im2col + cuBLAS", "cuDNN channels-last",
                                     "cuDNN channels-first"};
int indexOf(ConvolutionWay way) {
  return static_cast<int>(way);
}

std::vector<ConvolutionWay> candidateWays(ConvolutionPath path) {
  switch (path) {
    case ConvolutionPath::kIm2col:
      return {ConvolutionWay::kIm2col};
    case ConvolutionPath::kCudnn:
      return {ConvolutionWay::kCudnnChannelsLast};
    case ConvolutionPath::kCudnnChannelsFirst:
      return {ConvolutionWay::kCudnnChannelsFirst};
    default:
      return {std::begin(kConvolutionWays), std::end(kConvolutionWays)};
  }
}

// One layer of the host model, as the device needs it.
struct DeviceLayer {
  Kind kind = Kind::kLinear;
  std::string name;
  SampleShape input, output;
  int parameterSlice = -1;  // index into parameterLayers(), or -1
  std::size_t offset = 0;   // of its parameters in the flat buffers
  bool needsInputGradient = false;
  int cudnn = -1;          // conv2d: its index in the model's CudnnConvolutions, or -1
  ConvolutionWay way = ConvolutionWay::kIm2col;  // conv2d: the fastest tried at the reserved batch
  // conv2d: ms of a forward + backward by each way timed (0: not timed)
  float timings[std::size(kConvolutionWays)] = {};
  ConvGeometry conv{};
  PoolGeometry pool{};
  // Set by reserve(): where its output and its output's gradient lie (flatten: those below).
  float* y = nullptr;
  float* dy = nullptr;
  float* columns = nullptr;            // conv2d: K × (B·pixels)
  std::int32_t* winners = nullptr;     // max_pool2d
  std::size_t outputOffset = 0, gradientOffset = 0, scratchOffset = 0;

  bool viaCudnn() const { return way != ConvolutionWay::kIm2col; }
  bool hasBias() const { return kind == Kind::kLinear || kind == Kind::kConv2d; }
  // K and the fields per sample of the layer's matrix product: a dense layer is a convolution
  // with one field of in features.
  Index fieldSize() const {
    return kind == Kind::kConv2d ? Index{conv.kernel} * conv.kernel * conv.channels : input.size();
  }
  Index fieldsPerSample() const {
    return kind == Kind::kConv2d ? Index{conv.outHeight} * conv.outWidth : 1;
  }
  Index outChannels() const { return kind == Kind::kConv2d ? output.channels : output.size(); }
};

int toInt(Index value) { return static_cast<int>(value); }

// Whether `p` lies in page-locked host memory (cudaHostAlloc'd or registered), which the copy
// engine reads directly.
bool pageLocked(const void* p) {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, p) != cudaSuccess) {
    cudaGetLastError();  // not an error to keep: the answer is "no"
    return false;
  }
  return attributes.type == cudaMemoryTypeHost;
}

// Page-locked host memory as a memory resource (GpuModel::pinnedMemory()).
class PinnedResource final : public std::pmr::memory_resource {
  void* do_allocate(std::size_t bytes, std::size_t /*alignment: at least 256*/) override {
    void* p = nullptr;
    RINGTRAIN_MODELS_CUDA_CHECK(cudaHostAlloc(&p, std::max<std::size_t>(bytes, 1),
                                              cudaHostAllocDefault));
    return p;
  }
  void do_deallocate(void* p, std::size_t, std::size_t) override { cudaFreeHost(p); }
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
    return this == &other;
  }
};

DeviceLayer describeLayer(const Layer<float>& layer) {
  DeviceLayer d;
  d.name = layer.name();
  d.input = layer.inputShape();
  d.output = layer.outputShape();
  const std::string_view kind = layer.kind();
  if (kind == "linear") {
    d.kind = Kind::kLinear;
  } else if (kind == "relu") {
    d.kind = Kind::kRelu;
  } else if (kind == "flatten") {
    d.kind = Kind::kFlatten;
  } else if (kind == "conv2d") {
    d.kind = Kind::kConv2d;
    const Conv2dOptions& o = dynamic_cast<const Conv2d<float>&>(layer).options();
    d.conv = {toInt(d.input.channels), toInt(d.input.height), toInt(d.input.width),
              toInt(o.kernel),         toInt(o.stride),       toInt(o.padding),
              toInt(d.output.height),  toInt(d.output.width),
              o.inputLayout == ImageLayout::kChannelsFirst && d.input.channels > 1};
  } else if (kind == "max_pool2d") {
    d.kind = Kind::kMaxPool2d;
    const auto& pool = dynamic_cast<const MaxPool2d<float>&>(layer);
    d.pool = {toInt(d.input.channels),  toInt(d.input.height), toInt(d.input.width),
              toInt(pool.kernel()),     toInt(pool.stride()),  toInt(d.output.height),
              toInt(d.output.width)};
  } else {
    throw std::invalid_argument("GPU model: layer '" + layer.name() + "' is a " +
                                std::string(kind) +
                                ", which has no GPU implementation (linear, relu, conv2d, "
                                "max_pool2d, flatten)");
  }
  return d;
}

// Rounds element counts up to 256 bytes, cudaMalloc's own alignment, so every region starts
// where a vectorised load can.
std::size_t aligned(Index elements) { return (static_cast<std::size_t>(elements) + 63) / 64 * 64; }

template <class T>
T* deviceAlloc(std::size_t count) {
  void* p = nullptr;
  if (count > 0) RINGTRAIN_MODELS_CUDA_CHECK(cudaMalloc(&p, count * sizeof(T)));
  return static_cast<T*>(p);
}

std::string milliseconds(float ms) {
  std::array<char, 32> text{};
  std::snprintf(text.data(), text.size(), "%.3f ms", static_cast<double>(ms));
  return text.data();
}

// cuBLAS's recommended workspace for Hopper; given explicitly so cuBLAS never allocates per call.
constexpr std::size_t kCublasWorkspaceBytes = std::size_t{32} << 20;

}  // namespace

// One input slot: pinned staging for the batch's inputs and targets, their device copy, and the
// events that order the copy stream, the compute stream and the host around them.
struct InputSlot {
  void* host = nullptr;           // pinned: inputs, then labels or target values
  float* device = nullptr;        // same layout
  LossSums* deviceSums = nullptr;
  LossSums* hostSums = nullptr;   // pinned
  cudaEvent_t copied = nullptr;   // copy stream: the host staging may be refilled
  cudaEvent_t consumed = nullptr; // compute stream: the last step that read `device` is done
  cudaEvent_t summed = nullptr;   // compute stream: hostSums holds the loss of that step
  Index samples = 0;
};

struct GpuModel::Impl {
  // Host-side description.
  std::string name;
  BatchRequirements requirements;
  bool labels = true;
  Index classesOrOutputs = 0;
  std::vector<DeviceLayer> layers;
  std::vector<LayerParameters> parameterLayers;
  std::size_t parameterCount = 0;
  Index sampleSize = 0;

  // Device state.
  cudaStream_t compute = nullptr;
  cudaStream_t copy = nullptr;
  cublasHandle_t cublas = nullptr;
  void* cublasWorkspace = nullptr;
  float* parameters = nullptr;
  float* gradients = nullptr;
#if RINGTRAIN_HAVE_CUDNN
  std::unique_ptr<CudnnConvolutions> convolutions;  // when a convolution reads channels-last
#endif
  std::string convolutionNotes;  // why a convolution stayed on im2col
  ConvolutionPath path = ConvolutionPath::kFastest;

  // Sized by reserve().
  Index capacity = 0;
  float* activations = nullptr;
  float* activationGrads = nullptr;
  float* scratch = nullptr;  // im2col columns of every conv, back to back
  std::int32_t* winners = nullptr;
  float* ones = nullptr;          // for the dense layers' bias gradients: db = dY · 1
  float* biasPartials = nullptr;  // the convolutions' bias gradients (biasGradient)
  std::array<InputSlot, 2> slots{};
  int nextSlot = 0;
  InputSlot* current = nullptr;  // the slot of the last forward (or evaluated chunk)
  bool backwardPending = false;

  Impl(const Model<float>& host, const GpuModelOptions& options);
  ~Impl();
  void release();
  void reserve(Index batch);
  void stage(const Batch<float>& batch, Index first, Index samples);
  void forward(Index samples, bool training);
  void backward(const GradientReadyCallback& onGradientsReady);
  const float* layerInput(std::size_t i) const {
    return i == 0 ? current->device : layers[i - 1].y;
  }
  // Y = W · X for a dense layer or a convolution's columns, bias added (and the ReLU above it
  // taken, when `relu` is given) in one pass after the product.
  void matrixForward(const DeviceLayer& layer, const float* x, Index batch, float* relu);
  void matrixBackward(const DeviceLayer& layer, const float* x, Index batch);
  void matrixInputGradient(const DeviceLayer& layer, Index batch, float* dx);
  bool cudnnForward(const DeviceLayer& layer, const float* x, Index batch);
  bool cudnnBackwardWeight(const DeviceLayer& layer, const float* x, Index batch);
  bool cudnnBackwardInput(const DeviceLayer& layer, Index batch, float* dx);
  void useCudnn(const GpuModelOptions& options);
  void reserveConvolutions(Index batch);
  void chooseConvolutionPaths(Index batch);
  bool takeWay(DeviceLayer& layer, ConvolutionWay way, Index batch);
  float timeConvolution(std::size_t i, Index batch);
  std::string describeConvolution(const DeviceLayer& layer) const;
  std::string describeConvolutions() const;
};

GpuModel::Impl::Impl(const Model<float>& host, const GpuModelOptions& options)
    : name(host.name()),
      requirements(host.batchRequirements()),
      labels(host.loss().needsLabels()),
      classesOrOutputs(host.outputSize()),
      parameterLayers(host.parameterLayers().begin(), host.parameterLayers().end()),
      parameterCount(host.parameterCount()),
      sampleSize(host.inputShape().size()) {
  const std::string_view loss = host.loss().kind();
  if (loss != "softmax_cross_entropy" && loss != "mean_squared_error")
    throw std::invalid_argument("GPU model: loss '" + std::string(loss) +
                                "' has no GPU implementation");
  bool parametersBelow = false;
  for (int i = 0; i < host.layerCount(); ++i) {
    DeviceLayer d = describeLayer(host.layer(i));
    for (std::size_t s = 0; s < parameterLayers.size(); ++s) {
      if (parameterLayers[s].layerIndex == i) {
        d.parameterSlice = static_cast<int>(s);
        d.offset = parameterLayers[s].offset;
      }
    }
    d.needsInputGradient = parametersBelow;
    parametersBelow = parametersBelow || d.parameterSlice >= 0;
    layers.push_back(d);
  }
  try {
    RINGTRAIN_MODELS_CUDA_CHECK(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
    RINGTRAIN_MODELS_CUDA_CHECK(cudaStreamCreateWithFlags(&copy, cudaStreamNonBlocking));
    RINGTRAIN_MODELS_CUBLAS_CHECK(cublasCreate(&cublas));
    RINGTRAIN_MODELS_CUBLAS_CHECK(cublasSetStream(cublas, compute));
    RINGTRAIN_MODELS_CUDA_CHECK(cudaMalloc(&cublasWorkspace, kCublasWorkspaceBytes));
    RINGTRAIN_MODELS_CUBLAS_CHECK(cublasSetWorkspace(cublas, cublasWorkspace,
                                                     kCublasWorkspaceBytes));
    RINGTRAIN_MODELS_CUBLAS_CHECK(cublasSetMathMode(
        cublas, options.tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    for (InputSlot& slot : slots) {
      RINGTRAIN_MODELS_CUDA_CHECK(cudaEventCreateWithFlags(&slot.copied, cudaEventDisableTiming));
      RINGTRAIN_MODELS_CUDA_CHECK(
          cudaEventCreateWithFlags(&slot.consumed, cudaEventDisableTiming));
      RINGTRAIN_MODELS_CUDA_CHECK(cudaEventCreateWithFlags(&slot.summed, cudaEventDisableTiming));
      slot.deviceSums = deviceAlloc<LossSums>(1);
      RINGTRAIN_MODELS_CUDA_CHECK(
          cudaHostAlloc(reinterpret_cast<void**>(&slot.hostSums), sizeof(LossSums),
                        cudaHostAllocDefault));
    }
    parameters = deviceAlloc<float>(parameterCount);
    gradients = deviceAlloc<float>(parameterCount);
    const std::span<const float> values = host.parameters();
    RINGTRAIN_MODELS_CUDA_CHECK(cudaMemcpy(parameters, values.data(), values.size_bytes(),
                                           cudaMemcpyHostToDevice));
    RINGTRAIN_MODELS_CUDA_CHECK(cudaMemset(gradients, 0, parameterCount * sizeof(float)));
    Index widestConvolution = 0;
    for (const DeviceLayer& layer : layers)
      if (layer.kind == Kind::kConv2d)
        widestConvolution = std::max(widestConvolution, layer.outChannels());
    biasPartials =
        deviceAlloc<float>(static_cast<std::size_t>(biasPartialsCount(widestConvolution)));
    path = options.convolutions;
    if (path != ConvolutionPath::kIm2col) useCudnn(options);
  } catch (...) {
    release();
    throw;
  }
}

GpuModel::Impl::~Impl() { release(); }

// Frees everything; errors are ignored (a destructor must not throw, and a failed free leaves
// nothing to do).
void GpuModel::Impl::release() {
  if (compute != nullptr) cudaStreamSynchronize(compute);
  if (copy != nullptr) cudaStreamSynchronize(copy);
#if RINGTRAIN_HAVE_CUDNN
  convolutions.reset();
#endif
  for (InputSlot& slot : slots) {
    cudaFreeHost(slot.host);
    cudaFree(slot.device);
    cudaFree(slot.deviceSums);
    cudaFreeHost(slot.hostSums);
    for (cudaEvent_t event : {slot.copied, slot.consumed, slot.summed})
      if (event != nullptr) cudaEventDestroy(event);
    slot = {};
  }
  for (void* p : {static_cast<void*>(activations), static_cast<void*>(activationGrads),
                  static_cast<void*>(scratch), static_cast<void*>(winners),
                  static_cast<void*>(ones), static_cast<void*>(biasPartials),
                  static_cast<void*>(parameters), static_cast<void*>(gradients), cublasWorkspace})
    cudaFree(p);
  if (cublas != nullptr) cublasDestroy(cublas);
  if (copy != nullptr) cudaStreamDestroy(copy);
  if (compute != nullptr) cudaStreamDestroy(compute);
  compute = copy = nullptr;
  cublas = nullptr;
}

void GpuModel::Impl::reserve(Index batch) {
  if (batch <= capacity) return;
  // Memory in use by enqueued work may not be freed under it.
  RINGTRAIN_MODELS_CUDA_CHECK(cudaStreamSynchronize(copy));
  RINGTRAIN_MODELS_CUDA_CHECK(cudaStreamSynchronize(compute));
  backwardPending = false;  // the regions move
  current = nullptr;
  reserveConvolutions(batch);

  // The CPU model's arenas: one region per layer, flatten sharing the one below; gradients laid
  // out from the top.
  const std::size_t n = layers.size();
  std::size_t activationsSize = 0, gradientsSize = 0, scratchSize = 0, winnersSize = 0;
  const Index onesNeeded = batch;  // a dense layer's columns
  for (DeviceLayer& layer : layers) {
    const Index values = layer.output.size() * batch;
    if (layer.kind != Kind::kFlatten) {
      layer.outputOffset = activationsSize;
      activationsSize += aligned(values);
    }
    if (layer.kind == Kind::kConv2d) {  // also for cuDNN's: im2col is timed against it
      layer.scratchOffset = scratchSize;
      scratchSize += aligned(layer.fieldSize() * layer.fieldsPerSample() * batch);
    }
    if (layer.kind == Kind::kMaxPool2d) {
      layer.scratchOffset = winnersSize;
      winnersSize += aligned(values);
    }
  }
  for (std::size_t i = n; i-- > 0;) {
    if (i + 1 < n && layers[i + 1].kind == Kind::kFlatten) {
      layers[i].gradientOffset = layers[i + 1].gradientOffset;
      continue;
    }
    layers[i].gradientOffset = gradientsSize;
    gradientsSize += aligned(layers[i].output.size() * batch);
  }

  for (void* p : {static_cast<void*>(activations), static_cast<void*>(activationGrads),
                  static_cast<void*>(scratch), static_cast<void*>(winners),
                  static_cast<void*>(ones)})
    RINGTRAIN_MODELS_CUDA_CHECK(cudaFree(p));
  activations = activationGrads = scratch = ones = nullptr;
  winners = nullptr;
  activations = deviceAlloc<float>(activationsSize);
  activationGrads = deviceAlloc<float>(gradientsSize);
  scratch = deviceAlloc<float>(scratchSize);
  winners = deviceAlloc<std::int32_t>(winnersSize);
  ones = deviceAlloc<float>(static_cast<std::size_t>(onesNeeded));
  fill(ones, 1.0f, onesNeeded, compute);

  for (std::size_t i = 0; i < n; ++i) {
    DeviceLayer& layer = layers[i];
    layer.y = layer.kind == Kind::kFlatten ? (i == 0 ? nullptr : layers[i - 1].y)
                                           : activations + layer.outputOffset;
    layer.dy = activationGrads + layer.gradientOffset;
    layer.columns = layer.kind == Kind::kConv2d ? scratch + layer.scratchOffset : nullptr;
    layer.winners = layer.kind == Kind::kMaxPool2d ? winners + layer.scratchOffset : nullptr;
  }

  // Staging: inputs, then labels (int32) or target values (float), 4 bytes each.
  const Index targetsPerSample = labels ? 1 : classesOrOutputs;
  const std::size_t slotBytes =
      static_cast<std::size_t>((sampleSize + targetsPerSample) * batch) * sizeof(float);
  for (InputSlot& slot : slots) {
    RINGTRAIN_MODELS_CUDA_CHECK(cudaFreeHost(slot.host));
    RINGTRAIN_MODELS_CUDA_CHECK(cudaFree(slot.device));
    slot.host = nullptr;
    slot.device = nullptr;
    RINGTRAIN_MODELS_CUDA_CHECK(cudaHostAlloc(&slot.host, slotBytes, cudaHostAllocDefault));
    slot.device = deviceAlloc<float>(slotBytes / sizeof(float));
  }
  chooseConvolutionPaths(batch);
  RINGTRAIN_MODELS_CUDA_CHECK(cudaStreamSynchronize(compute));
  capacity = batch;
}

// Copies samples [first, first + samples) of `batch` to the next slot's device memory on the
// copy stream; the compute stream waits for it.
void GpuModel::Impl::stage(const Batch<float>& batch, Index first, Index samples) {
  // Everything enqueued so far on the compute stream belongs to steps that used the slot of the
  // previous forward: mark it, so that its next refill (two forwards from now) waits for it.
  if (current != nullptr) RINGTRAIN_MODELS_CUDA_CHECK(cudaEventRecord(current->consumed, compute));
  InputSlot& slot = slots[static_cast<std::size_t>(nextSlot)];
  nextSlot ^= 1;
  // The host staging of this slot is free once its last copy has finished (usually long ago).
  RINGTRAIN_MODELS_CUDA_CHECK(cudaEventSynchronize(slot.copied));

  const auto start = static_cast<std::size_t>(first);
  const auto count = static_cast<std::size_t>(samples);
  const std::size_t inputBytes = count * static_cast<std::size_t>(sampleSize) * sizeof(float);
  const void* inputs = batch.inputs.data() + start * static_cast<std::size_t>(sampleSize);
  const void* targets = nullptr;
  std::size_t targetBytes = 0;
  if (labels) {
    targets = batch.labels.data() + start;
    targetBytes = count * sizeof(std::int32_t);
  } else {
    const auto outputs = static_cast<std::size_t>(classesOrOutputs);
    targets = batch.values.data() + start * outputs;
    targetBytes = count * outputs * sizeof(float);
  }
  auto* device = reinterpret_cast<unsigned char*>(slot.device);
  RINGTRAIN_MODELS_CUDA_CHECK(cudaStreamWaitEvent(copy, slot.consumed, 0));
  if (pageLocked(inputs) && pageLocked(targets)) {
    // Sent from where it lies: no staging copy on the host (pinnedMemory()).
    RINGTRAIN_MODELS_CUDA_CHECK(
        cudaMemcpyAsync(device, inputs, inputBytes, cudaMemcpyHostToDevice, copy));
    RINGTRAIN_MODELS_CUDA_CHECK(cudaMemcpyAsync(device + inputBytes, targets, targetBytes,
                                                cudaMemcpyHostToDevice, copy));
  } else {
    auto* staging = static_cast<unsigned char*>(slot.host);
    std::memcpy(staging, inputs, inputBytes);
    std::memcpy(staging + inputBytes, targets, targetBytes);
    RINGTRAIN_MODELS_CUDA_CHECK(cudaMemcpyAsync(device, staging, inputBytes + targetBytes,
                                                cudaMemcpyHostToDevice, copy));
  }
  RINGTRAIN_MODELS_CUDA_CHECK(cudaEventRecord(slot.copied, copy));
  RINGTRAIN_MODELS_CUDA_CHECK(cudaStreamWaitEvent(compute, slot.copied, 0));
  slot.samples = samples;
  current = &slot;
}

void GpuModel::Impl::matrixForward(const DeviceLayer& layer, const float* x, Index batch,
                                   float* relu) {
  const int o = toInt(layer.outChannels());
  const int k = toInt(layer.fieldSize());
  const int fields = toInt(layer.fieldsPerSample() * batch);
  const float* weight = parameters + layer.offset;
  if (!cudnnForward(layer, x, batch)) {
    const float* columns = x;
    if (layer.kind == Kind::kConv2d) {
      im2col(x, layer.columns, layer.conv, batch, compute);
      columns = layer.columns;
    }
    // The weight is row-major O×K, i.e. column-major K×O: Y (O×N) = Wᵀ-as-stored · columns.
    const float one = 1.0f, zero = 0.0f;
    RINGTRAIN_MODELS_CUBLAS_CHECK(cublasSgemm(cublas, CUBLAS_OP_T, CUBLAS_OP_N, o, fields, k, &one,
                                              weight, k, columns, k, &zero, layer.y, o));
  }
  addBias(layer.y, weight + static_cast<std::size_t>(o) * static_cast<std::size_t>(k), o, fields,
          relu, compute);
}

void GpuModel::Impl::matrixBackward(const DeviceLayer& layer, const float* x, Index batch) {
  const int o = toInt(layer.outChannels());
  const int k = toInt(layer.fieldSize());
  const int fields = toInt(layer.fieldsPerSample() * batch);
  const float one = 1.0f, zero = 0.0f;
  float* weightGradient = gradients + layer.offset;
  float* biasGradient = weightGradient + static_cast<std::size_t>(o) * k;
  if (!cudnnBackwardWeight(layer, x, batch)) {
    // dW (O×K row-major = K×O column-major) = columns (K×N) · dYᵀ (N×O).
    const float* columns = layer.kind == Kind::kConv2d ? layer.columns : x;
    RINGTRAIN_MODELS_CUBLAS_CHECK(cublasSgemm(cublas, CUBLAS_OP_N, CUBLAS_OP_T, k, o, fields, &one,
                                              columns, k, layer.dy, o, &zero, weightGradient, k));
  }
  if (layer.kind == Kind::kConv2d) {  // many columns of few rows: our own sums
    cuda::biasGradient(layer.dy, o, fields, biasGradient, biasPartials, compute);
    return;
  }
  // db = dY · 1: the row sums as a matrix-vector product.
  RINGTRAIN_MODELS_CUBLAS_CHECK(cublasSgemv(cublas, CUBLAS_OP_N, o, fields, &one, layer.dy, o, ones,
                                            1, &zero, biasGradient, 1));
}

// The cuDNN path's three calls; each returns false where the layer is not on it.
bool GpuModel::Impl::cudnnForward([[maybe_unused]] const DeviceLayer& layer,
                                  [[maybe_unused]] const float* x, [[maybe_unused]] Index batch) {
#if RINGTRAIN_HAVE_CUDNN
  if (!layer.viaCudnn()) return false;
  convolutions->forward(layer.cudnn, x, parameters + layer.offset, layer.y, toInt(batch));
  return true;
#else
  return false;
#endif
}

bool GpuModel::Impl::cudnnBackwardWeight([[maybe_unused]] const DeviceLayer& layer,
                                         [[maybe_unused]] const float* x,
                                         [[maybe_unused]] Index batch) {
#if RINGTRAIN_HAVE_CUDNN
  if (!layer.viaCudnn()) return false;
  convolutions->backwardWeight(layer.cudnn, x, layer.dy, gradients + layer.offset, toInt(batch));
  return true;
#else
  return false;
#endif
}

bool GpuModel::Impl::cudnnBackwardInput([[maybe_unused]] const DeviceLayer& layer,
                                        [[maybe_unused]] Index batch, [[maybe_unused]] float* dx) {
#if RINGTRAIN_HAVE_CUDNN
  if (!layer.viaCudnn()) return false;
  convolutions->backwardInput(layer.cudnn, parameters + layer.offset, layer.dy, dx, toInt(batch));
  return true;
#else
  return false;
#endif
}

void GpuModel::Impl::matrixInputGradient(const DeviceLayer& layer, Index batch, float* dx) {
  if (cudnnBackwardInput(layer, batch, dx)) return;
  const int o = toInt(layer.outChannels());
  const int k = toInt(layer.fieldSize());
  const int fields = toInt(layer.fieldsPerSample() * batch);
  const float one = 1.0f, zero = 0.0f;
  // dcolumns (K×N) = Wᵀ (K×O, the stored weight as is) · dY. A convolution reuses its column
  // buffer for them (the weight gradient has been enqueued before, on the same stream).
  float* target = layer.kind == Kind::kConv2d ? layer.columns : dx;
  RINGTRAIN_MODELS_CUBLAS_CHECK(cublasSgemm(cublas, CUBLAS_OP_N, CUBLAS_OP_N, k, fields, o, &one,
                                            parameters + layer.offset, k, layer.dy, o, &zero,
                                            target, k));
  if (layer.kind == Kind::kConv2d) col2im(layer.columns, dx, layer.conv, batch, compute);
}

// Convolutions reading channels-last go to cuDNN where the build has it (a first layer on
// channels-first images of several channels stays on im2col).
void GpuModel::Impl::useCudnn([[maybe_unused]] const GpuModelOptions& options) {
#if RINGTRAIN_HAVE_CUDNN
  for (DeviceLayer& layer : layers) {
    if (layer.kind != Kind::kConv2d || layer.conv.channelsFirst) continue;
    if (!convolutions)
      convolutions = std::make_unique<CudnnConvolutions>(compute, options.tf32, options.algorithms);
    layer.cudnn = convolutions->add(layer.name, layer.conv, toInt(layer.output.channels),
                                    layer.needsInputGradient);
  }
#endif
}

// Plans each cuDNN convolution for `batch`; one cuDNN cannot serve goes back to im2col for good.
void GpuModel::Impl::reserveConvolutions([[maybe_unused]] Index batch) {
#if RINGTRAIN_HAVE_CUDNN
  for (DeviceLayer& layer : layers) {
    if (layer.cudnn < 0) continue;
    const std::string why = convolutions->reserve(layer.cudnn, toInt(batch));
    if (why.empty()) continue;
    convolutionNotes += "; " + why + ": im2col instead";
    layer.cudnn = -1;
  }
#endif
}

// Each convolution cuDNN can run takes the fastest of the ways `path` allows at `batch`, timed on
// the reserved buffers (whose values do not matter), as cuDNN's own Find chooses among its
// algorithms: on an H200 cuDNN's float32 kernels for channels-last data lost to im2col at small
// batches. Leaves garbage in the layers' outputs and gradients, which the next step overwrites.
void GpuModel::Impl::chooseConvolutionPaths(Index batch) {
  const std::vector<ConvolutionWay> ways = candidateWays(path);
  for (std::size_t i = 0; i < layers.size(); ++i) {
    DeviceLayer& layer = layers[i];
    std::fill(std::begin(layer.timings), std::end(layer.timings), 0.0f);
    layer.way = ConvolutionWay::kIm2col;
    if (layer.cudnn < 0) continue;
    std::optional<ConvolutionWay> best;
    for (const ConvolutionWay way : ways) {
      if (!takeWay(layer, way, batch)) continue;
      float& ms = layer.timings[indexOf(way)];
      if (ways.size() > 1) ms = timeConvolution(i, batch);
      if (!best || ms < layer.timings[indexOf(*best)]) best = way;
    }
    takeWay(layer, best.value_or(ConvolutionWay::kIm2col), batch);
  }
}

// Puts the layer on `way`; false (and im2col) where cuDNN has no plan for it at `batch`.
bool GpuModel::Impl::takeWay(DeviceLayer& layer, ConvolutionWay way, [[maybe_unused]] Index batch) {
  layer.way = way;
  if (way == ConvolutionWay::kIm2col) return true;
#if RINGTRAIN_HAVE_CUDNN
  const CudnnLayout layout = way == ConvolutionWay::kCudnnChannelsLast
                                 ? CudnnLayout::kChannelsLast
                                 : CudnnLayout::kChannelsFirst;
  if (convolutions->usable(layer.cudnn, toInt(batch), layout)) {
    convolutions->setLayout(layer.cudnn, layout);
    return true;
  }
#endif
  layer.way = ConvolutionWay::kIm2col;
  return false;
}

float GpuModel::Impl::timeConvolution(std::size_t i, Index batch) {
  constexpr int kPasses = 3;
  const DeviceLayer& layer = layers[i];
  const float* x = i == 0 ? slots[0].device : layers[i - 1].y;
  const auto pass = [&] {
    matrixForward(layer, x, batch, nullptr);
    matrixBackward(layer, x, batch);
    if (layer.needsInputGradient) matrixInputGradient(layer, batch, layers[i - 1].dy);
  };
  pass();  // first calls: cuDNN's plan, cuBLAS's heuristics
  cudaEvent_t start = nullptr, stop = nullptr;
  RINGTRAIN_MODELS_CUDA_CHECK(cudaEventCreate(&start));
  RINGTRAIN_MODELS_CUDA_CHECK(cudaEventCreate(&stop));
  RINGTRAIN_MODELS_CUDA_CHECK(cudaEventRecord(start, compute));
  for (int p = 0; p < kPasses; ++p) pass();
  RINGTRAIN_MODELS_CUDA_CHECK(cudaEventRecord(stop, compute));
  float ms = 0;
  const cudaError_t rc = cudaEventSynchronize(stop);
  if (rc == cudaSuccess) cudaEventElapsedTime(&ms, start, stop);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  RINGTRAIN_MODELS_CUDA_CHECK(rc);
  return ms / kPasses;
}

std::string GpuModel::Impl::describeConvolution(const DeviceLayer& layer) const {
  std::string text = layer.name + ": " + kWayNames[indexOf(layer.way)];
#if RINGTRAIN_HAVE_CUDNN
  if (layer.cudnn >= 0 && capacity == 0) return layer.name + ": chosen at the first batch";
  if (layer.viaCudnn())
    text = layer.name + ": cuDNN " + convolutions->chosen(layer.cudnn, toInt(capacity));
#endif
  std::string others;
  for (const ConvolutionWay way : kConvolutionWays) {
    const float ms = layer.timings[indexOf(way)];
    if (ms <= 0) continue;
    if (way == layer.way) {
      text += ", " + milliseconds(ms) + " a pass";
    } else {
      others += (others.empty() ? "" : ", ") + milliseconds(ms) + " by " + kWayNames[indexOf(way)];
    }
  }
  return others.empty() ? text : text + " against " + others;
}

std::string GpuModel::Impl::describeConvolutions() const {
  std::string text;
  for (const DeviceLayer& layer : layers)
    if (layer.kind == Kind::kConv2d) text += (text.empty() ? "" : "; ") + describeConvolution(layer);
#if RINGTRAIN_HAVE_CUDNN
  if (convolutions)
    text = "cuDNN " + cudnnVersion() + (path == ConvolutionPath::kFastest ? " where faster" : "") +
           ": " + text;
#endif
  return text.empty() ? "none" : text + convolutionNotes;
}

void GpuModel::Impl::forward(Index batch, bool training) {
  const std::size_t n = layers.size();
  for (std::size_t i = 0; i < n; ++i) {
    DeviceLayer& layer = layers[i];
    const float* x = layerInput(i);
    switch (layer.kind) {
      case Kind::kLinear:
      case Kind::kConv2d: {
        // A ReLU right above takes its output in the same pass as the bias.
        const bool fuse = i + 1 < n && layers[i + 1].kind == Kind::kRelu;
        matrixForward(layer, x, batch, fuse ? layers[i + 1].y : nullptr);
        if (fuse) ++i;
        break;
      }
      case Kind::kRelu:
        relu(x, layer.y, layer.output.size() * batch, compute);
        break;
      case Kind::kMaxPool2d:
        maxPoolForward(x, layer.y, layer.winners, layer.pool, batch, compute);
        break;
      case Kind::kFlatten:
        layer.y = const_cast<float*>(x);  // the input's memory, as on the CPU
        break;
    }
  }
  const DeviceLayer& top = layers.back();
  float* gradient = training ? top.dy : nullptr;
  const float* targets = current->device + sampleSize * batch;
  if (labels) {
    softmaxCrossEntropy(top.y, reinterpret_cast<const std::int32_t*>(targets), classesOrOutputs,
                        batch, gradient, current->deviceSums, compute);
  } else {
    meanSquaredError(top.y, targets, classesOrOutputs, batch, gradient, current->deviceSums,
                     compute);
  }
  RINGTRAIN_MODELS_CUDA_CHECK(cudaMemcpyAsync(current->hostSums, current->deviceSums,
                                              sizeof(LossSums), cudaMemcpyDeviceToHost, compute));
  RINGTRAIN_MODELS_CUDA_CHECK(cudaEventRecord(current->summed, compute));
}

void GpuModel::Impl::backward(const GradientReadyCallback& onGradientsReady) {
  const Index batch = current->samples;
  for (std::size_t i = layers.size(); i-- > 0;) {
    const DeviceLayer& layer = layers[i];
    if (layer.kind == Kind::kFlatten) continue;  // its input gradient is its output gradient
    const float* x = layerInput(i);
    if (layer.parameterSlice >= 0) {
      matrixBackward(layer, x, batch);
      if (onGradientsReady)
        onGradientsReady(parameterLayers[static_cast<std::size_t>(layer.parameterSlice)]);
    }
    if (!layer.needsInputGradient) continue;
    float* dx = layers[i - 1].dy;
    switch (layer.kind) {
      case Kind::kLinear:
      case Kind::kConv2d:
        matrixInputGradient(layer, batch, dx);
        break;
      case Kind::kRelu:
        reluBackward(layer.y, layer.dy, dx, layer.output.size() * batch, compute);
        break;
      case Kind::kMaxPool2d:
        maxPoolBackward(layer.dy, layer.winners, dx, layer.pool, batch, compute);
        break;
      case Kind::kFlatten:
        break;
    }
  }
}

GpuModel::GpuModel(const Model<float>& host, const GpuModelOptions& options)
    : impl_(std::make_unique<Impl>(host, options)) {}

GpuModel::~GpuModel() = default;

cudaStream_t GpuModel::stream() const { return impl_->compute; }
std::size_t GpuModel::parameterCount() const { return impl_->parameterCount; }
float* GpuModel::parameters() { return impl_->parameters; }
float* GpuModel::gradients() { return impl_->gradients; }
const float* GpuModel::parameters() const { return impl_->parameters; }
const float* GpuModel::gradients() const { return impl_->gradients; }
Index GpuModel::reservedBatch() const { return impl_->capacity; }
std::string GpuModel::convolutions() const { return impl_->describeConvolutions(); }

const float* GpuModel::outputs() const {
  return impl_->current == nullptr ? nullptr : impl_->layers.back().y;
}

void GpuModel::uploadParameters(std::span<const float> host) {
  if (host.size() != impl_->parameterCount)
    throw std::invalid_argument("GPU model '" + impl_->name + "': " + std::to_string(host.size()) +
                                " values for " + std::to_string(impl_->parameterCount) +
                                " parameters");
  // On the compute stream, so it is ordered after the steps enqueued before it.
  RINGTRAIN_MODELS_CUDA_CHECK(cudaMemcpyAsync(impl_->parameters, host.data(), host.size_bytes(),
                                              cudaMemcpyHostToDevice, impl_->compute));
  RINGTRAIN_MODELS_CUDA_CHECK(cudaStreamSynchronize(impl_->compute));
}

void GpuModel::downloadParameters(std::span<float> host) const {
  if (host.size() != impl_->parameterCount)
    throw std::invalid_argument("GPU model '" + impl_->name + "': room for " +
                                std::to_string(host.size()) + " values but " +
                                std::to_string(impl_->parameterCount) + " parameters");
  RINGTRAIN_MODELS_CUDA_CHECK(cudaMemcpyAsync(host.data(), impl_->parameters, host.size_bytes(),
                                              cudaMemcpyDeviceToHost, impl_->compute));
  RINGTRAIN_MODELS_CUDA_CHECK(cudaStreamSynchronize(impl_->compute));
}

void GpuModel::reserve(Index batch) { impl_->reserve(batch); }

std::pmr::memory_resource* GpuModel::pinnedMemory() {
  static PinnedResource resource;  // stateless: one serves every model
  return &resource;
}

void GpuModel::forward(const Batch<float>& batch) {
  impl_->backwardPending = false;
  const Index samples = impl_->requirements.countSamples(batch);
  if (impl_->labels) checkClassLabels(batch.labels, impl_->classesOrOutputs, samples);
  impl_->reserve(samples);
  impl_->stage(batch, 0, samples);
  impl_->forward(samples, /*training=*/true);
  impl_->backwardPending = true;
}

void GpuModel::backward(const GradientReadyCallback& onGradientsReady) {
  if (!impl_->backwardPending)
    throw std::logic_error("GPU model '" + impl_->name +
                           "': backward() needs a forward() on a batch first, once per forward");
  impl_->backwardPending = false;
  impl_->backward(onGradientsReady);
}

BatchResult GpuModel::lastResult() {
  const InputSlot* slot = impl_->current;
  if (slot == nullptr) return {};
  RINGTRAIN_MODELS_CUDA_CHECK(cudaEventSynchronize(slot->summed));
  return {slot->hostSums->loss, slot->hostSums->correct, slot->samples, slot->samples};
}

BatchResult GpuModel::evaluate(const Batch<float>& batch) {
  impl_->backwardPending = false;
  const Index samples = impl_->requirements.countSamples(batch);
  if (impl_->labels) checkClassLabels(batch.labels, impl_->classesOrOutputs, samples);
  if (impl_->capacity == 0) impl_->reserve(std::min<Index>(samples, 256));
  const Index chunk = impl_->capacity;
  BatchResult total;
  for (Index start = 0; start < samples; start += chunk) {
    const Index n = std::min(chunk, samples - start);
    impl_->stage(batch, start, n);
    impl_->forward(n, /*training=*/false);
    total.add(lastResult());
  }
  return total;
}

}  // namespace ringtrain::models::cuda
