// The GPU mirror of Model<float> (models/cuda) against the CPU implementation, on the same
// seeded random inputs and parameters: every layer's forward and backward (through small models
// that make each gradient visible in a parameter gradient), both losses, whole mlp and cnn
// steps with float32 and TF32 math, the optimiser kernels against training/optimizer.cc, the
// accumulation kernels against training/gradient_accumulator.cc, the non-finite check, and
// the batch checks. Without a visible GPU every test skips saying why.
#include "models/cuda/gpu_model.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <cuda_runtime_api.h>

#include "models/conv2d.h"
#include "models/cuda/update_kernels.h"
#include "models/flatten.h"
#include "models/linear.h"
#include "models/max_pool2d.h"
#include "models/mean_squared_error.h"
#include "models/model_factory.h"
#include "models/relu.h"
#include "models/softmax_cross_entropy.h"
#include "training/gradient_accumulator.h"
#include "training/optimizer.h"

namespace ringtrain::models::cuda {
namespace {

constexpr double kFloat32Tolerance = 1e-5;  // ‖gpu − cpu‖ / ‖cpu‖, float32 products both sides
constexpr double kAnyAlgorithmTolerance = 1e-4;  // cuDNN's FFT and Winograd transforms
// TF32 keeps 10 mantissa bits of each factor (unit roundoff 2^-11), and a step's gradient goes
// through every layer's products twice: the H200 gave 0.022 (mlp, batch of 7) and 0.0069 (cnn).
constexpr double kTf32Tolerance = 5e-2;

std::string reasonToSkip() {
  int devices = 0;
  const cudaError_t rc = cudaGetDeviceCount(&devices);
  if (rc != cudaSuccess) {
    cudaGetLastError();  // clear it
    return std::string("no GPU visible (") + cudaGetErrorName(rc) + ": " + cudaGetErrorString(rc) +
           "): the GPU model is compiled and linked but not run here";
  }
  if (devices == 0) return "no GPU visible: the GPU model is compiled and linked but not run here";
  return "";
}

class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = reasonToSkip();
    if (!why.empty()) GTEST_SKIP() << why;
  }
};

void check(cudaError_t rc) {
  ASSERT_EQ(rc, cudaSuccess) << cudaGetErrorString(rc);
}

std::vector<float> randomFloats(std::size_t count, double bound, std::uint64_t seed) {
  SplitMix64 generator(seed);
  std::vector<float> values(count);
  for (float& v : values)
    v = static_cast<float>(generator.symmetric(bound));
  return values;
}

std::vector<float> download(const float* device, std::size_t count) {
  std::vector<float> host(count);
  check(cudaMemcpy(host.data(), device, count * sizeof(float), cudaMemcpyDeviceToHost));
  return host;
}

// A device copy that frees itself.
struct DeviceBuffer {
  explicit DeviceBuffer(const std::vector<float>& host) : count(host.size()) {
    check(cudaMalloc(reinterpret_cast<void**>(&data), count * sizeof(float)));
    check(cudaMemcpy(data, host.data(), count * sizeof(float), cudaMemcpyHostToDevice));
  }
  ~DeviceBuffer() { cudaFree(data); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  std::vector<float> host() const { return download(data, count); }

  float* data = nullptr;
  std::size_t count = 0;
};

void upload(std::span<const float> host, const DeviceBuffer& device) {
  ASSERT_EQ(host.size(), device.count);
  check(cudaMemcpy(device.data, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice));
}

double relativeError(std::span<const float> gpu, std::span<const float> cpu) {
  double difference = 0, norm = 0;
  for (std::size_t i = 0; i < cpu.size(); ++i) {
    const double d = static_cast<double>(gpu[i]) - static_cast<double>(cpu[i]);
    difference += d * d;
    norm += static_cast<double>(cpu[i]) * cpu[i];
  }
  return std::sqrt(difference) / std::sqrt(norm);
}

// The whole gradient within `tolerance`, and each parameter tensor within ten times it, so that
// a failure names the tensor (and a NaN left in an unwritten element fails the comparison). A
// small tensor such as a bias, a sum of ~25,000 terms of both signs in float on both sides, may
// keep fewer correct digits than the whole.
void expectSameGradients(const Model<float>& cpu, const std::vector<float>& gpu, double tolerance) {
  const std::span<const float> expected = cpu.gradients();
  EXPECT_LT(relativeError(gpu, expected), tolerance) << "whole gradient";
  for (const ParameterEntry& entry : cpu.parameterTable()) {
    const double error =
        relativeError(std::span<const float>(gpu).subspan(entry.offset, entry.count),
                      expected.subspan(entry.offset, entry.count));
    EXPECT_LT(error, 10 * tolerance) << entry.name << " gradient";
  }
}

struct Data {
  std::vector<float> inputs;
  std::vector<std::int32_t> labels;
  std::vector<float> values;

  Batch<float> batch() const { return {inputs, labels, values}; }
};

Data randomData(const Model<float>& model, Index samples, std::uint64_t seed) {
  Data data;
  data.inputs =
      randomFloats(static_cast<std::size_t>(model.inputShape().size() * samples), 1, seed);
  if (model.loss().needsLabels()) {
    SplitMix64 generator(seed + 1);
    for (Index b = 0; b < samples; ++b)
      data.labels.push_back(static_cast<std::int32_t>(generator.next() % model.outputSize()));
  } else {
    data.values = randomFloats(static_cast<std::size_t>(model.outputSize() * samples), 2, seed + 1);
  }
  return data;
}

// Random parameters, biases included (initialize() leaves those zero, which would hide a bias
// that is never added).
void randomizeParameters(Model<float>& model, double bound, std::uint64_t seed) {
  const std::vector<float> values = randomFloats(model.parameterCount(), bound, seed);
  std::copy(values.begin(), values.end(), model.parameters().begin());
}

// One training step on both sides; compares outputs, loss, correct count and gradients.
void expectSameStep(Model<float>& cpu, GpuModel& gpu, const Data& data, double tolerance) {
  const Index samples = static_cast<Index>(data.inputs.size()) / cpu.inputShape().size();
  // Poison: an element the GPU never writes stays NaN and fails the comparison.
  check(cudaMemsetAsync(gpu.gradients(), 0xff, gpu.parameterCount() * sizeof(float), gpu.stream()));
  gpu.forward(data.batch());
  gpu.backward();
  const BatchResult gpuResult = gpu.lastResult();
  // Taken before forward(), which may leave the loss's gradient in the outputs (Model::outputs).
  const ConstBatchView<float> inferred = cpu.infer(data.inputs);
  const std::vector<float> cpuOutputs(inferred.data(), inferred.data() + inferred.size());
  const BatchResult cpuResult = cpu.forward(data.batch());
  cpu.backward();

  EXPECT_EQ(gpuResult.samples, samples);
  EXPECT_NEAR(gpuResult.lossSum, cpuResult.lossSum, tolerance * std::abs(cpuResult.lossSum));
  // With TF32 a near tie between two logits may go the other way.
  EXPECT_NEAR(gpuResult.correct, cpuResult.correct, tolerance > kFloat32Tolerance ? 2 : 0);
  const std::vector<float> outputs = download(gpu.outputs(), cpuOutputs.size());
  EXPECT_LT(relativeError(outputs, cpuOutputs), tolerance) << "outputs";
  expectSameGradients(cpu, download(gpu.gradients(), gpu.parameterCount()), tolerance);
}

// Every convolution path, each checked against the CPU (the cuDNN ones are im2col without
// cuDNN).
constexpr ConvolutionPath kPaths[] = {ConvolutionPath::kIm2col, ConvolutionPath::kCudnn,
                                      ConvolutionPath::kCudnnChannelsFirst,
                                      ConvolutionPath::kFastest};
std::string pathName(ConvolutionPath path) {
  return std::string(nameIn(kConvolutionPathNames, path));
}

// Builds the model, gives it random parameters and checks two steps of different sizes (the
// second smaller, so it runs in the front of regions sized for the first, from the other slot).
void expectSameSteps(Model<float> cpu, std::uint64_t seed, double tolerance = kFloat32Tolerance,
                     const GpuModelOptions& options = {}) {
  randomizeParameters(cpu, 0.3, seed);
  GpuModel gpu(cpu, options);
  {
    SCOPED_TRACE("batch of 32");
    expectSameStep(cpu, gpu, randomData(cpu, 32, seed + 10), tolerance);
  }
  {
    SCOPED_TRACE("batch of 7");
    expectSameStep(cpu, gpu, randomData(cpu, 7, seed + 20), tolerance);
  }
}

template <class Kind, class... Args>
std::unique_ptr<Layer<float>> make(Args&&... args) {
  return std::make_unique<Kind>(std::forward<Args>(args)...);
}

Model<float> modelOf(SampleShape input, std::vector<std::unique_ptr<Layer<float>>> layers,
                     bool classification) {
  std::unique_ptr<Loss<float>> loss;
  if (classification) {
    loss = std::make_unique<SoftmaxCrossEntropy<float>>();
  } else {
    loss = std::make_unique<MeanSquaredError<float>>();
  }
  return Model<float>("test", input, std::move(layers), std::move(loss));
}

TEST_F(GpuTest, LinearAndReluForwardAndBackwardMatchTheCpu) {
  // fc1's gradient goes through relu's and fc2's input gradients.
  std::vector<std::unique_ptr<Layer<float>>> layers;
  layers.push_back(make<Linear<float>>("fc1", 37, 29, Initialization::kHe));
  layers.push_back(make<Relu<float>>("relu1", SampleShape{29, 1, 1}));
  layers.push_back(make<Linear<float>>("fc2", 29, 23, Initialization::kXavier));
  expectSameSteps(modelOf({37, 1, 1}, std::move(layers), /*classification=*/false), 100);
}

TEST_F(GpuTest, ConvolutionsInBothLayoutsWithStrideAndPaddingMatchTheCpu) {
  // conv1 reads a channels-first image with stride 2; conv2 reads conv1's channels-last output
  // with padding 2; conv1's gradient goes through conv2's input gradient (col2im).
  for (const ConvolutionPath path : kPaths) {
    SCOPED_TRACE(pathName(path));
    std::vector<std::unique_ptr<Layer<float>>> layers;
    layers.push_back(
        make<Conv2d<float>>("conv1", SampleShape{3, 11, 9},
                            Conv2dOptions{.outChannels = 5,
                                          .kernel = 3,
                                          .stride = 2,
                                          .padding = 1,
                                          .inputLayout = ImageLayout::kChannelsFirst}));
    const SampleShape afterConv1 = layers.back()->outputShape();
    layers.push_back(make<Relu<float>>("relu1", afterConv1));
    layers.push_back(make<Conv2d<float>>(
        "conv2", afterConv1,
        Conv2dOptions{.outChannels = 4, .kernel = 3, .stride = 1, .padding = 2}));
    const SampleShape afterConv2 = layers.back()->outputShape();
    layers.push_back(make<Flatten<float>>("flatten", afterConv2));
    layers.push_back(make<Linear<float>>("fc", afterConv2.size(), 6, Initialization::kXavier));
    expectSameSteps(modelOf({3, 11, 9}, std::move(layers), /*classification=*/false), 200,
                    kFloat32Tolerance, {.convolutions = path});
  }
}

TEST_F(GpuTest, ConvolutionsTakeThePathAskedForAndSaySo) {
  // The cnn's conv1 reads one channel (both layouts at once), conv2 channels-last: with cuDNN in
  // the build every way is timed for both, and kCudnn and kCudnnChannelsFirst put both on
  // cuDNN in their layout.
  const std::string im2colOnly = "conv1: im2col + cuBLAS; conv2: im2col + cuBLAS";
  GpuModel im2col(makeModel<float>({.name = "cnn"}), {.convolutions = ConvolutionPath::kIm2col});
  im2col.reserve(64);
  EXPECT_EQ(im2col.convolutions(), im2colOnly);
  GpuModel fastest(makeModel<float>({.name = "cnn"}));
  fastest.reserve(64);
  const std::string timed = fastest.convolutions();
#if RINGTRAIN_TEST_EXPECTS_CUDNN
  EXPECT_EQ(timed.rfind("cuDNN ", 0), 0u) << timed;
  for (const char* layer : {"conv1: ", "conv2: "}) {
    const std::size_t at = timed.find(layer);
    ASSERT_NE(at, std::string::npos) << timed;
    const std::size_t end = timed.find(';', at);
    const std::string line = timed.substr(at, end == std::string::npos ? end : end - at);
    // The winner's time, then the two others' ways.
    const std::size_t against = line.find(" a pass against ");
    ASSERT_NE(against, std::string::npos) << line;
    int others = 0;
    for (std::size_t by = line.find(" by ", against); by != std::string::npos;
         by = line.find(" by ", by + 1))
      ++others;
    EXPECT_EQ(others, 2) << line;
  }
  for (const auto& [path, layout] :
       {std::pair{ConvolutionPath::kCudnn, "channels-last"},
        std::pair{ConvolutionPath::kCudnnChannelsFirst, "channels-first"}}) {
    GpuModel cudnn(makeModel<float>({.name = "cnn"}), {.convolutions = path});
    cudnn.reserve(64);
    const std::string forced = cudnn.convolutions();
    for (const char* layer : {"conv1: cuDNN ", "conv2: cuDNN "})
      EXPECT_NE(forced.find(std::string(layer) + layout + ": forward "), std::string::npos)
          << forced;
    EXPECT_NE(forced.find("data ALGO_"), std::string::npos) << forced;  // conv2 passes it on
  }
#else
  EXPECT_EQ(timed, im2colOnly);
#endif
}

TEST_F(GpuTest, MaxPoolingWithAndWithoutOverlapMatchesTheCpu) {
  std::vector<std::unique_ptr<Layer<float>>> layers;
  layers.push_back(make<Conv2d<float>>("conv1", SampleShape{2, 12, 12},
                                       Conv2dOptions{.outChannels = 6,
                                                     .kernel = 3,
                                                     .stride = 1,
                                                     .padding = 1,
                                                     .inputLayout = ImageLayout::kChannelsFirst}));
  layers.push_back(make<MaxPool2d<float>>("pool1", layers.back()->outputShape(), 2));
  layers.push_back(
      make<Conv2d<float>>("conv2", layers.back()->outputShape(),
                          Conv2dOptions{.outChannels = 7, .kernel = 2, .stride = 1, .padding = 0}));
  // Overlapping windows (3 wide, stride 2) on a 5×5 map: one input can win two outputs.
  layers.push_back(make<MaxPool2d<float>>("pool2", layers.back()->outputShape(), 3, 2));
  layers.push_back(make<Flatten<float>>("flatten", layers.back()->outputShape()));
  layers.push_back(
      make<Linear<float>>("fc", layers.back()->outputShape().size(), 5, Initialization::kXavier));
  expectSameSteps(modelOf({2, 12, 12}, std::move(layers), /*classification=*/true), 300);
}

TEST_F(GpuTest, SoftmaxCrossEntropyWithLargeLogitsMatchesTheCpu) {
  // Logits of several hundred: the max trick must keep exp() finite.
  std::vector<std::unique_ptr<Layer<float>>> layers;
  layers.push_back(make<Linear<float>>("fc", 20, 10, Initialization::kXavier));
  Model<float> cpu = modelOf({20, 1, 1}, std::move(layers), /*classification=*/true);
  randomizeParameters(cpu, 30, 400);
  GpuModel gpu(cpu);
  expectSameStep(cpu, gpu, randomData(cpu, 50, 401), kFloat32Tolerance);
}

TEST_F(GpuTest, MlpStepMatchesTheCpu) {
  expectSameSteps(makeModel<float>({.name = "mlp"}), 500);
}

TEST_F(GpuTest, CnnStepMatchesTheCpu) {
  for (const ConvolutionPath path : kPaths) {
    SCOPED_TRACE(pathName(path));
    expectSameSteps(makeModel<float>({.name = "cnn"}), 600, kFloat32Tolerance,
                    {.convolutions = path});
  }
}

TEST_F(GpuTest, CnnStepWithAnyCudnnAlgorithmMatchesTheCpu) {
  // FFT and Winograd round otherwise than plain products: a looser bound than float32's.
  for (const ConvolutionPath path :
       {ConvolutionPath::kCudnn, ConvolutionPath::kCudnnChannelsFirst}) {
    SCOPED_TRACE(pathName(path));
    expectSameSteps(makeModel<float>({.name = "cnn"}), 650, kAnyAlgorithmTolerance,
                    {.convolutions = path, .algorithms = ConvolutionAlgorithms::kAny});
  }
}

TEST_F(GpuTest, LinregStepMatchesTheCpu) {
  expectSameSteps(makeModel<float>({.name = "linreg"}), 700);
}

TEST_F(GpuTest, Tf32StepsMatchTheCpuWithinTf32Precision) {
  {
    SCOPED_TRACE("mlp");
    expectSameSteps(makeModel<float>({.name = "mlp"}), 800, kTf32Tolerance, {.tf32 = true});
  }
  {
    SCOPED_TRACE("cnn");
    for (const ConvolutionPath path : kPaths) {
      SCOPED_TRACE(pathName(path));
      expectSameSteps(makeModel<float>({.name = "cnn"}), 900, kTf32Tolerance,
                      {.tf32 = true, .convolutions = path});
    }
  }
}

TEST_F(GpuTest, EvaluateInChunksMatchesTheCpu) {
  Model<float> cpu = makeModel<float>({.name = "cnn"});
  randomizeParameters(cpu, 0.3, 1000);
  GpuModel gpu(cpu);
  cpu.reserve(16);
  gpu.reserve(16);
  const Data data = randomData(cpu, 45, 1001);  // chunks of 16, 16 and 13
  const BatchResult expected = cpu.evaluate(data.batch());
  const BatchResult result = gpu.evaluate(data.batch());
  EXPECT_EQ(result.samples, 45);
  EXPECT_EQ(result.correct, expected.correct);
  EXPECT_NEAR(result.lossSum, expected.lossSum, kFloat32Tolerance * expected.lossSum);
}

TEST_F(GpuTest, ParametersUploadAndDownloadUnchanged) {
  Model<float> cpu = makeModel<float>({.name = "mlp"});
  randomizeParameters(cpu, 1, 1100);
  GpuModel gpu(cpu);
  std::vector<float> back(cpu.parameterCount(), std::numeric_limits<float>::quiet_NaN());
  gpu.downloadParameters(back);
  EXPECT_TRUE(std::equal(back.begin(), back.end(), cpu.parameters().begin()));
  const std::vector<float> other = randomFloats(cpu.parameterCount(), 1, 1101);
  gpu.uploadParameters(other);
  gpu.downloadParameters(back);
  EXPECT_EQ(back, other);
  EXPECT_THROW(gpu.uploadParameters(std::span<const float>(other).first(10)),
               std::invalid_argument);
}

// The GPU model throws what the CPU model throws, message included.
void expectSameException(Model<float>& cpu, GpuModel& gpu, const Batch<float>& batch) {
  std::string expected = "(no exception)";
  try {
    cpu.forward(batch);
  } catch (const std::invalid_argument& e) {
    expected = e.what();
  }
  EXPECT_NE(expected, "(no exception)");
  std::string actual = "(no exception)";
  try {
    gpu.forward(batch);
  } catch (const std::invalid_argument& e) {
    actual = e.what();
  }
  EXPECT_EQ(actual, expected);
}

TEST_F(GpuTest, BatchesOfTheWrongSizeThrowAsOnTheCpu) {
  Model<float> cpu = makeModel<float>({.name = "mlp"});
  GpuModel gpu(cpu);
  Data data = randomData(cpu, 4, 1200);
  EXPECT_THROW(gpu.backward(), std::logic_error);
  {
    SCOPED_TRACE("inputs not a whole number of samples");
    expectSameException(cpu, gpu,
                        {std::span<const float>(data.inputs).first(784 * 3 + 5), data.labels, {}});
  }
  {
    SCOPED_TRACE("no inputs");
    expectSameException(cpu, gpu, {{}, data.labels, {}});
  }
  {
    SCOPED_TRACE("too few labels");
    expectSameException(cpu, gpu,
                        {data.inputs, std::span<const std::int32_t>(data.labels).first(3), {}});
  }
  {
    SCOPED_TRACE("label out of range");
    data.labels[2] = 10;
    expectSameException(cpu, gpu, data.batch());
  }
  EXPECT_THROW(gpu.backward(), std::logic_error);

  Model<float> linreg = makeModel<float>({.name = "linreg"});
  GpuModel gpuLinreg(linreg);
  Data values = randomData(linreg, 4, 1201);
  values.values.pop_back();
  SCOPED_TRACE("too few target values");
  expectSameException(linreg, gpuLinreg, values.batch());
}

// |gpu − cpu| within a few float roundings of the terms that made them: the two compilers may
// fuse a multiply and an add differently.
void expectCloseElementwise(const std::vector<float>& gpu, std::span<const float> cpu,
                            const std::vector<float>& scale, const char* what) {
  int wrong = 0;
  for (std::size_t i = 0; i < cpu.size(); ++i) {
    const double tolerance = 4 * FLT_EPSILON * (std::abs(cpu[i]) + scale[i]);
    if (!(std::abs(static_cast<double>(gpu[i]) - cpu[i]) <= tolerance) && wrong++ < 3)
      ADD_FAILURE() << what << "[" << i << "]: gpu " << gpu[i] << ", cpu " << cpu[i];
  }
  EXPECT_EQ(wrong, 0) << what;
}

void expectSameOptimizerSteps(const training::OptimizerOptions& options, float learningRate) {
  SCOPED_TRACE(std::string(nameIn(training::kOptimizerNames, options.kind)) +
               (options.nesterov ? " nesterov" : "") + ", momentum " +
               std::to_string(options.momentum) + ", weight decay " +
               std::to_string(options.weightDecay));
  constexpr std::size_t kCount = 100003;
  std::vector<float> parameters = randomFloats(kCount, 1, 1300);
  DeviceBuffer deviceParameters(parameters);
  DeviceBuffer state0(std::vector<float>(kCount, 0.0f));
  DeviceBuffer state1(std::vector<float>(kCount, 0.0f));
  const std::unique_ptr<training::Optimizer> cpu = training::makeOptimizer(options, kCount);
  for (std::uint64_t step = 0; step < 3; ++step) {
    SCOPED_TRACE("step " + std::to_string(step + 1));
    const std::vector<float> gradients = randomFloats(kCount, 1, 1310 + step);
    std::vector<float> scale(kCount);
    for (std::size_t i = 0; i < kCount; ++i)
      scale[i] = std::abs(parameters[i]) + std::abs(gradients[i]);
    const DeviceBuffer deviceGradients(gradients);
    if (options.kind == training::OptimizerKind::kSgd) {
      sgdUpdate(deviceParameters.data, deviceGradients.data,
                options.momentum > 0 ? state0.data : nullptr, kCount, learningRate,
                options.momentum, options.nesterov, options.weightDecay, nullptr);
    } else {
      adamUpdate(deviceParameters.data, deviceGradients.data, state0.data, state1.data, kCount,
                 learningRate, options.beta1, options.beta2, options.epsilon, options.weightDecay,
                 options.kind == training::OptimizerKind::kAdamW,
                 static_cast<std::int64_t>(step) + 1, nullptr);
    }
    check(cudaDeviceSynchronize());
    cpu->step(parameters, gradients, learningRate);
    expectCloseElementwise(deviceParameters.host(), parameters, scale, "parameters");
    const std::vector<std::span<float>> state = cpu->state();
    if (!state.empty() && !state[0].empty())
      expectCloseElementwise(state0.host(), state[0], scale, "first state");
    if (state.size() > 1) expectCloseElementwise(state1.host(), state[1], scale, "second state");
    // The next step starts from the cpu's values, so that each step is held to its own
    // roundings rather than to those carried from the steps before.
    upload(parameters, deviceParameters);
    if (!state.empty() && !state[0].empty()) upload(state[0], state0);
    if (state.size() > 1) upload(state[1], state1);
  }
}

TEST_F(GpuTest, SgdStepsMatchTheCpuOptimizer) {
  expectSameOptimizerSteps({.kind = training::OptimizerKind::kSgd, .momentum = 0.0f}, 0.1f);
  expectSameOptimizerSteps(
      {.kind = training::OptimizerKind::kSgd, .momentum = 0.0f, .weightDecay = 0.01f}, 0.1f);
  expectSameOptimizerSteps({.kind = training::OptimizerKind::kSgd, .momentum = 0.9f}, 0.1f);
  expectSameOptimizerSteps(
      {.kind = training::OptimizerKind::kSgd, .momentum = 0.9f, .weightDecay = 0.01f}, 0.1f);
  expectSameOptimizerSteps({.kind = training::OptimizerKind::kSgd,
                            .momentum = 0.9f,
                            .nesterov = true,
                            .weightDecay = 0.01f},
                           0.1f);
}

TEST_F(GpuTest, AdamAndAdamwStepsMatchTheCpuOptimizer) {
  expectSameOptimizerSteps({.kind = training::OptimizerKind::kAdam}, 1e-3f);
  expectSameOptimizerSteps({.kind = training::OptimizerKind::kAdam, .weightDecay = 0.01f}, 1e-3f);
  expectSameOptimizerSteps({.kind = training::OptimizerKind::kAdamW, .weightDecay = 0.01f}, 1e-3f);
}

// Three micro-batches (64, 64 and an epoch's last 20 samples, batch 64), each gradient handed
// over in two layers as backward does: the device sum and the step's gradient as the host's.
TEST_F(GpuTest, AccumulationKernelsFollowTheHostRule) {
  constexpr std::size_t kCount = 70001;
  constexpr std::size_t kSplit = 30000;
  const std::int64_t samples[] = {64, 64, 20};
  training::GradientAccumulator host(kCount, 64);
  DeviceBuffer sum(std::vector<float>(kCount, std::numeric_limits<float>::quiet_NaN()));
  for (int micro = 0; micro < 3; ++micro) {
    SCOPED_TRACE("micro-batch " + std::to_string(micro));
    std::vector<float> gradients =
        randomFloats(kCount, 1, 1500 + static_cast<std::uint64_t>(micro));
    const DeviceBuffer device(gradients);
    host.beginMicroBatch(micro, samples[micro], micro == 2);
    const training::AccumulateRule rule = host.rule();
    for (const auto& [offset, count] :
         {std::pair{kSplit, kCount - kSplit}, std::pair{std::size_t{0}, kSplit}}) {
      host.layerReady(gradients, offset, count);
      if (rule.phase == training::AccumulatePhase::kFinish) {
        finishAccumulation(device.data + offset, sum.data + offset, count, rule.weight, rule.scale,
                           nullptr);
      } else {
        accumulateGradients(sum.data + offset, device.data + offset, count, rule.weight,
                            rule.phase == training::AccumulatePhase::kStart, nullptr);
      }
    }
    check(cudaDeviceSynchronize());
    if (micro == 2) {
      const std::vector<float> scale(kCount, 1.0f);
      expectCloseElementwise(device.host(), gradients, scale, "the step's gradient");
    }
  }
}

TEST_F(GpuTest, FirstNonFiniteFindsTheFirstNanOrInfinity) {
  std::vector<float> values = randomFloats(300007, 1e30, 1400);
  {
    const DeviceBuffer device(values);
    EXPECT_EQ(firstNonFinite(device.data, values.size(), nullptr), -1);
    EXPECT_EQ(firstNonFinite(device.data, 0, nullptr), -1);
  }
  values.back() = std::numeric_limits<float>::infinity();
  {
    const DeviceBuffer device(values);
    EXPECT_EQ(firstNonFinite(device.data, values.size(), nullptr), 300006);
    EXPECT_EQ(firstNonFinite(device.data, values.size() - 1, nullptr), -1);
  }
  values[250000] = std::numeric_limits<float>::quiet_NaN();
  values[12345] = -std::numeric_limits<float>::infinity();
  const DeviceBuffer device(values);
  EXPECT_EQ(firstNonFinite(device.data, values.size(), nullptr), 12345);
}

}  // namespace
}  // namespace ringtrain::models::cuda
