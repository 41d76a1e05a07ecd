// model_step_perf: how fast one rank computes a training step (forward + backward, with the
// gradient-ready callbacks the engine uses) of the mlp, cnn and gpt models, on one thread.
//
// --precision fp32,bf16 times each model in both matrix precisions (models/matrix_products.h),
// the rounds interleaved (fp32, bf16, fp32, ...) so that both see the same machine, and adds
// the bare square product of --gemm N in each precision: OpenBLAS's sgemm against the bfloat16
// kernel. --json FILE writes every row as a JSON line beside the table.
//
// For the mlp the same run also times the bare matrix products of such a step (three forward,
// three weight gradients, two input gradients) as plain Eigen calls on the same shapes: the gap
// between the two rows is everything else a step does (bias, ReLU, loss, bookkeeping).
//
//   build/bin/model_step_perf --batch 64 --hidden 512,512
//   build/bin/model_step_perf --models mlp,cnn,gpt --precision fp32,bf16 --json steps.jsonl
//   build/bin/model_step_perf --device cuda   (GPU builds: the GPU model on the current device)
//
// On the GPU a step is what the trainer does: copy the batch in, forward, backward, an SGD
// momentum update of the parameters, and wait for the loss (one synchronisation per step).
//
// Each configuration runs --repeats rounds of at least --seconds each and prints the median
// and the best round; GFLOP/s counts the matrix products only. The JSON adds the median CPU time
// per step of the process (median_cpu_ms), which leaves out other processes' turns on the core.
//
// --layer-times (cpu) adds, after each model's rows, one more round that times every layer's
// forward and backward through the model's layer observer: ms per step and share of the step,
// in the thread's CPU time, which leaves out the time other processes held the core.
//
// --stage-times (cpu) adds one more round with models/stage_clock.h on: the products' time per
// step (and GFLOP/s) against each kind of kernel between them (attention's softmax, layer norm,
// GELU, embeddings, the loss), each with the least bytes it moves per second, beside one core's
// memcpy bandwidth measured then; wall time, so run it on an idle core.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <iostream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "base/comma_list.h"
#include "base/steady_clock.h"
#include "models/flush_to_zero.h"
#include "models/matrix_products.h"
#include "models/model_factory.h"
#include "models/stage_clock.h"
#include "options/option_table.h"
#include "src/bench/standalone_options.h"
#ifdef RINGTRAIN_MODEL_STEP_PERF_CUDA
#include <cuda_runtime_api.h>

#include "models/cuda/cuda_errors.h"
#include "models/cuda/gpu_model.h"
#include "models/cuda/update_kernels.h"
#endif

namespace ringtrain {
namespace {

using models::Index;

struct Options {
  Index batch = 64;
  std::vector<Index> hidden{512, 512};
  std::vector<std::string> models{"mlp", "cnn"};
  double seconds = 1.0;
  int repeats = 5;
  bool flushToZero = true;
  std::string device = "cpu";
  std::vector<std::string> gpuConvolutions{"fastest"};  // cuda: a row of each conv model per path
  models::ConvolutionAlgorithms gpuConvAlgorithms = models::ConvolutionAlgorithms::kPlain;
  std::vector<models::Precision> precisions{models::Precision::kFloat32};
  models::GptShape gpt{};  // gpt-mini; its batch is --gpt-batch sequences
  Index gptBatch = 8;
  Index gemm = 1024;  // 0: no bare product rows
  std::string json;   // "" : no JSON
  bool layerTimes = false;
  bool stageTimes = false;
};

// What the table reads: the options, and the lists as typed (read after parsing).
struct Parsed {
  Options o;
  std::string hidden = "512,512";
  std::string modelList = "mlp,cnn";
  std::string precisionList = "fp32";
  std::string gpuConvolutionList = "fastest";
};

// A number parseOptions judges after reading, in its own words.
template <class Field>
options::Option<Parsed> anyNumber(std::string name, Field field, std::string help) {
  return bench::anyNumber<Parsed>(std::move(name), field, std::move(help));
}

const options::Table<Parsed>& optionTable() {
  // clang-format off
  static const options::Table<Parsed> table = bench::inGroup<Parsed>("model_step_perf options", {
      bench::lettered('b', anyNumber("batch", RINGTRAIN_FIELD(o.batch), "samples per step")),
      options::text<Parsed>("hidden", RINGTRAIN_FIELD(hidden), "mlp hidden widths"),
      options::text<Parsed>("models", RINGTRAIN_FIELD(modelList), "comma-separated: mlp, cnn, gpt"),
      options::text<Parsed>("precision", RINGTRAIN_FIELD(precisionList), "comma-separated: fp32, bf16 (cpu)"),
      anyNumber("gpt-batch", RINGTRAIN_FIELD(o.gptBatch), "gpt: sequences per step"),
      anyNumber("vocab", RINGTRAIN_FIELD(o.gpt.vocabulary), "gpt: vocabulary"),
      anyNumber("gemm", RINGTRAIN_FIELD(o.gemm), "size N of the bare N^3 product rows"),
      options::text<Parsed>("json", RINGTRAIN_FIELD(o.json), "also write each row as a JSON line to this file"),
      options::boolean<Parsed>("layer-times", RINGTRAIN_FIELD(o.layerTimes), "also time each layer (cpu)"),
      options::boolean<Parsed>("stage-times", RINGTRAIN_FIELD(o.stageTimes), "also time the products against the kernels between them, with their bandwidth (cpu)"),
      anyNumber("seconds", RINGTRAIN_FIELD(o.seconds), "least time per round"),
      anyNumber("repeats", RINGTRAIN_FIELD(o.repeats), "timed rounds"),
      options::text<Parsed>("device", RINGTRAIN_FIELD(o.device), "cpu, or cuda (GPU builds)"),
      options::text<Parsed>("gpu-convolutions", RINGTRAIN_FIELD(gpuConvolutionList), "cuda: comma-separated paths of the cnn's convolutions, a row each: fastest (timed per layer), im2col, cudnn, cudnn-nchw"),
      options::choice<Parsed>("gpu-conv-algorithms", RINGTRAIN_FIELD(o.gpuConvAlgorithms), models::kConvolutionAlgorithmNames, "cuda: cuDNN's algorithms, plain or any (train's option of that name)"),
      bench::valued(options::boolean<Parsed>("ftz", RINGTRAIN_FIELD(o.flushToZero), "flush denormals to zero (1) or not (0)")),
  });
  // clang-format on
  return table;
}

// Returns an error message for the first bad option, or nullopt; sets `help` for --help.
std::optional<std::string> parseOptions(int argc, char** argv, Options& o, bool& help) {
  const options::Program program{"model_step_perf", "usage: model_step_perf [options]"};
  Parsed parsed;
  if (auto error = bench::parseStandalone(program, optionTable(), argc, argv, parsed, help))
    return error;
  if (help) return std::nullopt;
  o = parsed.o;
  o.hidden.clear();
  for (const std::string& width : base::commaSeparated(parsed.hidden)) {
    try {
      o.hidden.push_back(std::stol(width));
    } catch (const std::exception&) {
      return "--hidden: '" + width + "' is not a number";
    }
  }
  o.models = base::commaSeparated(parsed.modelList);
  o.gpuConvolutions = base::commaSeparated(parsed.gpuConvolutionList);
  if (o.batch < 1) return "--batch must be at least 1";
  if (o.repeats < 1 || o.seconds <= 0) return "--repeats and --seconds must be positive";
  for (const std::string& m : o.models)
    if (m != "mlp" && m != "cnn" && m != "gpt")
      return "--models: unknown model '" + m + "' (mlp, cnn, gpt)";
  o.precisions.clear();
  for (const std::string& p : base::commaSeparated(parsed.precisionList)) {
    if (p != "fp32" && p != "bf16") return "--precision: unknown '" + p + "' (fp32, bf16)";
    o.precisions.push_back(p == "fp32" ? models::Precision::kFloat32
                                       : models::Precision::kBfloat16);
  }
  if (o.precisions.empty()) return "--precision: name fp32, bf16 or both";
  return std::nullopt;
}

struct Timing {
  double medianSeconds = 0;  // per step
  double bestSeconds = 0;
  // The process's CPU time per step, median over the rounds: what the step cost when other
  // processes share the core (the wall times then count their turns too).
  double medianCpuSeconds = 0;
};

// The calling thread's CPU time in seconds.
double threadSeconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// The process's CPU time in seconds, all its threads.
double processSeconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// Runs each of `variants` in rounds of at least `seconds`, the variants' rounds interleaved, and
// returns each one's median and best time per step.
std::vector<Timing> timeInterleaved(const std::vector<std::function<void()>>& variants,
                                    const Options& o) {
  using Clock = std::chrono::steady_clock;
  for (const auto& step : variants)
    for (int i = 0; i < 3; ++i)
      step();  // warm-up: first-touch of buffers, caches, the CPU's clock
  std::vector<std::vector<double>> perStep(variants.size()), cpuPerStep(variants.size());
  for (int r = 0; r < o.repeats; ++r) {
    for (std::size_t v = 0; v < variants.size(); ++v) {
      const auto start = Clock::now();
      const double cpuStart = processSeconds();
      std::int64_t steps = 0;
      double elapsed = 0;
      do {
        variants[v]();
        ++steps;
        elapsed = std::chrono::duration<double>(Clock::now() - start).count();
      } while (elapsed < o.seconds);
      perStep[v].push_back(elapsed / static_cast<double>(steps));
      cpuPerStep[v].push_back((processSeconds() - cpuStart) / static_cast<double>(steps));
    }
  }
  std::vector<Timing> timings;
  for (std::size_t v = 0; v < variants.size(); ++v) {
    std::sort(perStep[v].begin(), perStep[v].end());
    std::sort(cpuPerStep[v].begin(), cpuPerStep[v].end());
    timings.push_back({.medianSeconds = perStep[v][perStep[v].size() / 2],
                       .bestSeconds = perStep[v].front(),
                       .medianCpuSeconds = cpuPerStep[v][cpuPerStep[v].size() / 2]});
  }
  return timings;
}

Timing timeSteps(const std::function<void()>& step, const Options& o) {
  return timeInterleaved({step}, o).front();
}

std::string_view precisionName(models::Precision p) {
  return p == models::Precision::kFloat32 ? "fp32" : "bf16";
}

// The table on stdout and, with --json, the same rows as JSON lines.
class Report {
 public:
  explicit Report(const std::string& jsonPath) {
    if (jsonPath.empty()) return;
    json_.open(jsonPath);
    if (!json_) throw std::runtime_error("--json " + jsonPath + ": cannot open the file");
  }

  void header() const {
    fmt::print("{:<28} {:>5} {:>6} {:>10} {:>10} {:>12} {:>12} {:>9} {:>9}\n", "what", "prec",
               "batch", "params", "ms/step", "samples/s", "best", "GFLOP/s", "best");
  }

  // A JSON line as it is, where --json was given.
  void json(const std::string& line) {
    if (json_.is_open()) json_ << line << "\n";
  }

  void row(const std::string& what, models::Precision precision, Index batch, std::size_t params,
           double flopsPerStep, const Timing& t) {
    const auto b = static_cast<double>(batch);
    const double gflops = flopsPerStep / t.medianSeconds * 1e-9;
    fmt::print("{:<28} {:>5} {:>6} {:>10} {:>10.3f} {:>12.0f} {:>12.0f} {:>9.1f} {:>9.1f}\n", what,
               precisionName(precision), batch, params, t.medianSeconds * 1e3, b / t.medianSeconds,
               b / t.bestSeconds, gflops, flopsPerStep / t.bestSeconds * 1e-9);
    if (json_.is_open()) {
      json_ << fmt::format(
          "{{\"what\": \"{}\", \"precision\": \"{}\", \"batch\": {}, \"params\": {}, "
          "\"median_ms\": {:.4f}, \"best_ms\": {:.4f}, \"gflops\": {:.2f}, "
          "\"median_cpu_ms\": {:.4f}}}\n",
          what, precisionName(precision), batch, params, t.medianSeconds * 1e3, t.bestSeconds * 1e3,
          gflops, t.medianCpuSeconds * 1e3);
    }
  }

 private:
  std::ofstream json_;
};

// Inputs as data/ delivers them, and labels: values in [0, 1) and one class per sample, or (with
// `tokens`) token ids below `classes` and one label per position.
struct SyntheticBatch {
  std::vector<float> inputs;
  std::vector<std::int32_t> labels;
};

SyntheticBatch makeBatch(Index sampleSize, Index batch, Index classes, bool tokens) {
  SyntheticBatch data;
  models::SplitMix64 generator(42);
  data.inputs.resize(static_cast<std::size_t>(sampleSize * batch));
  for (float& v : data.inputs) {
    v = tokens ? static_cast<float>(generator.next() % classes)
               : static_cast<float>(0.5 + generator.symmetric(0.5));
  }
  for (Index b = 0; b < (tokens ? sampleSize * batch : batch); ++b)
    data.labels.push_back(static_cast<std::int32_t>(generator.next() % classes));
  return data;
}

// A step (forward, backward) of `model` in each of --precision's precisions, interleaved.
std::vector<Timing> timeModel(models::Model<float>& model, const SyntheticBatch& data,
                              Index batchSize, const Options& o) {
  model.initialize(1);
  model.reserve(batchSize);
  const models::Batch<float> batch{data.inputs, data.labels, {}};
  std::size_t announced = 0;  // what an engine would hand to its communication thread
  const models::GradientReadyCallback onReady = [&](const models::LayerParameters& layer) {
    announced += layer.count;
  };
  std::vector<std::function<void()>> variants;
  for (const models::Precision p : o.precisions) {
    variants.emplace_back([&, p] {
      models::setMatrixPrecision(p);
      model.forward(batch);
      model.backward(onReady);
    });
  }
  return timeInterleaved(variants, o);
}

// One more round of `model`'s step (forward, backward on `batch`, in the first --precision) with
// every layer's forward and backward timed; prints ms per step and share of the layers' total.
void reportLayerTimes(models::Model<float>& model, const models::Batch<float>& batch,
                      const Options& o) {
  models::setMatrixPrecision(o.precisions.front());
  const auto layers = static_cast<std::size_t>(model.layerCount());
  std::vector<double> forward(layers), backward(layers);
  double began = 0;
  model.setLayerObserver([&](int layer, models::LayerPhase phase, bool begins) {
    if (begins) {
      began = threadSeconds();
      return;
    }
    const double seconds = threadSeconds() - began;
    (phase == models::LayerPhase::kForward ? forward : backward)[std::size_t(layer)] += seconds;
  });
  std::int64_t steps = 0;
  for (const double start = threadSeconds(); threadSeconds() - start < o.seconds; ++steps) {
    model.forward(batch);
    model.backward();
  }
  model.setLayerObserver({});
  double total = 0;
  for (std::size_t i = 0; i < layers; ++i)
    total += forward[i] + backward[i];
  fmt::print("  {:<12} {:<11} {:>12} {:>13} {:>7}\n", "layer", "kind", "forward ms", "backward ms",
             "share");
  for (std::size_t i = 0; i < layers; ++i) {
    const models::Layer<float>& layer = model.layer(static_cast<int>(i));
    const double n = static_cast<double>(steps);
    fmt::print("  {:<12} {:<11} {:>12.3f} {:>13.3f} {:>6.1f}%\n", layer.name(), layer.kind(),
               forward[i] / n * 1e3, backward[i] / n * 1e3,
               100 * (forward[i] + backward[i]) / total);
  }
}

// Copy bandwidth of one core (bytes read and written), over a buffer well past the caches: the
// ceiling the stages' bandwidth is read against.
double copyGigabytesPerSecond(const Options& o) {
  const std::size_t count = std::size_t{16} << 20;  // 64 MiB of floats
  std::vector<float> from(count, 1.0f), to(count, 0.0f);
  return 2.0 * static_cast<double>(count * sizeof(float)) /
         timeSteps([&] { std::memcpy(to.data(), from.data(), count * sizeof(float)); }, o)
             .medianSeconds *
         1e-9;
}

// One more round of `model`'s step with the stage clock on: each stage's time per step, share of
// the step, and bandwidth (the least bytes its kernels move) or, for the products, GFLOP/s.
void reportStageTimes(models::Model<float>& model, const models::Batch<float>& batch,
                      double flopsPerStep, const std::string& label, const Options& o,
                      Report& report) {
  using models::kStageNames;
  models::setMatrixPrecision(o.precisions.front());
  models::takeStageTimes();
  models::enableStageClock(true);
  std::int64_t steps = 0;
  const std::int64_t start = steadyNowNs();
  do {
    model.forward(batch);
    model.backward();
    ++steps;
  } while (static_cast<double>(steadyNowNs() - start) * 1e-9 < o.seconds);
  const double stepNs = static_cast<double>(steadyNowNs() - start) / static_cast<double>(steps);
  models::enableStageClock(false);
  const models::StageTimes times = models::takeStageTimes();
  const double copy = copyGigabytesPerSecond(o);
  fmt::print("  {:<30} {:>9} {:>7} {:>10}   (one-core copy: {:.1f} GB/s)\n", "stage", "ms/step",
             "share", "GB/s", copy);
  double rest = stepNs;
  for (std::size_t i = 0; i < models::kStageCount; ++i) {
    const double ns = static_cast<double>(times.ns[i]) / static_cast<double>(steps);
    const double bytes = static_cast<double>(times.bytes[i]) / static_cast<double>(steps);
    rest -= ns;
    const bool products = kStageNames[i].value == models::Stage::kProducts;
    const double rate = ns > 0 ? (products ? flopsPerStep : bytes) / ns : 0;  // per ns = G per s
    fmt::print("  {:<30} {:>9.3f} {:>6.1f}% {:>10.1f}{}\n", kStageNames[i].name, ns * 1e-6,
               100 * ns / stepNs, rate, products ? " GFLOP/s" : "");
    report.json(fmt::format(
        "{{\"what\": \"{} stage\", \"stage\": \"{}\", \"ms\": {:.4f}, \"share\": {:.4f}, "
        "\"{}\": {:.2f}, \"copy_gbps\": {:.2f}}}",
        label, kStageNames[i].name, ns * 1e-6, ns / stepNs, products ? "gflops" : "gbps", rate,
        copy));
  }
  fmt::print("  {:<30} {:>9.3f} {:>6.1f}%\n", "the rest (adds, biases, copies)", rest * 1e-6,
             100 * rest / stepNs);
}

// The bare product C = A B of N x N matrices through models::product in each precision.
void reportBareProduct(Index n, const Options& o, Report& report) {
  const models::Matrix<float> a = models::Matrix<float>::Random(n, n);
  const models::Matrix<float> b = models::Matrix<float>::Random(n, n);
  models::Matrix<float> c(n, n);
  std::vector<std::function<void()>> variants;
  for (const models::Precision p : o.precisions) {
    variants.emplace_back([&, p] {
      models::setMatrixPrecision(p);
      models::product(c, a, b);
    });
  }
  const std::vector<Timing> timings = timeInterleaved(variants, o);
  for (std::size_t v = 0; v < timings.size(); ++v) {
    report.row(fmt::format("bare product {}^3", n), o.precisions[v], 1, 0,
               2.0 * double(n) * double(n) * double(n), timings[v]);
  }
}

#ifdef RINGTRAIN_MODEL_STEP_PERF_CUDA
models::ConvolutionPath convolutionPath(const std::string& name) {
  if (const auto path = valueIn(models::kConvolutionPathNames, name)) return *path;
  throw std::invalid_argument("--gpu-convolutions: '" + name + "' is none of " +
                              joinNames(models::kConvolutionPathNames, ", ", ", "));
}

Timing timeGpuModel(models::Model<float>& model, const SyntheticBatch& data, const Options& o,
                    const std::string& path) {
  model.initialize(1);
  models::cuda::GpuModel gpu(
      model, {.convolutions = convolutionPath(path), .algorithms = o.gpuConvAlgorithms});
  gpu.reserve(o.batch);
  float* velocity = nullptr;
  RINGTRAIN_MODELS_CUDA_CHECK(
      cudaMalloc(reinterpret_cast<void**>(&velocity), gpu.parameterCount() * sizeof(float)));
  RINGTRAIN_MODELS_CUDA_CHECK(cudaMemset(velocity, 0, gpu.parameterCount() * sizeof(float)));
  const models::Batch<float> batch{data.inputs, data.labels, {}};
  std::size_t announced = 0;
  const models::GradientReadyCallback onReady = [&](const models::LayerParameters& layer) {
    announced += layer.count;
  };
  const Timing timing = timeSteps(
      [&] {
        gpu.forward(batch);
        gpu.backward(onReady);
        models::cuda::sgdUpdate(gpu.parameters(), gpu.gradients(), velocity, gpu.parameterCount(),
                                1e-3f, 0.9f, false, 0.0f, gpu.stream());
        gpu.lastResult();
      },
      o);
  RINGTRAIN_MODELS_CUDA_CHECK(cudaFree(velocity));
  if (const std::string convolutions = gpu.convolutions(); convolutions != "none")
    fmt::print(stderr, "model_step_perf: {} on cuda, --gpu-convolutions {}: {}\n", model.name(),
               path, convolutions);
  return timing;
}
#endif

// The eight products of an mlp step (for hidden {512, 512}) as bare Eigen calls, same shapes,
// same storage orders (row-major weights, column-major batches), no bias, activation or loss.
Timing timeBareProducts(const std::vector<Index>& widths, const SyntheticBatch& data,
                        const Options& o) {
  using ColMajor = models::Matrix<float>;
  using RowMajor = models::RowMajorMatrix<float>;
  const std::size_t layers = widths.size() - 1;
  std::vector<RowMajor> weights, weightGrads;
  std::vector<ColMajor> activations, activationGrads;
  activations.push_back(Eigen::Map<const ColMajor>(data.inputs.data(), widths.front(), o.batch));
  for (std::size_t l = 0; l < layers; ++l) {
    weights.push_back(RowMajor::Random(widths[l + 1], widths[l]) * 0.05f);
    weightGrads.push_back(RowMajor::Zero(widths[l + 1], widths[l]));
    activations.push_back(ColMajor::Zero(widths[l + 1], o.batch));
    activationGrads.push_back(ColMajor::Random(widths[l + 1], o.batch));
  }
  return timeSteps(
      [&] {
        for (std::size_t l = 0; l < layers; ++l)
          activations[l + 1].noalias() = weights[l] * activations[l];
        for (std::size_t l = layers; l-- > 0;) {
          weightGrads[l].noalias() = activationGrads[l] * activations[l].transpose();
          if (l > 0) activationGrads[l - 1].noalias() = weights[l].transpose() * activationGrads[l];
        }
      },
      o);
}

// The model a --models name stands for, with its batch in samples (sequences for the gpt).
models::ModelSpec specFor(const std::string& name, const Options& o) {
  if (name == "gpt") return {.name = "gpt", .input = {1, o.gpt.context, 1}, .gpt = o.gpt};
  return {.name = name, .input = {1, 28, 28}, .classes = 10, .hidden = o.hidden};
}

std::string labelFor(const models::ModelSpec& spec) {
  std::string label = spec.name;
  if (spec.name == "mlp") {
    label += " 784";
    for (const Index w : spec.hidden)
      label += "-" + std::to_string(w);
    label += "-10";
  }
  if (spec.name == "gpt")
    label += fmt::format(" L{} C{} T{} V{}", spec.gpt.layers, spec.gpt.width, spec.gpt.context,
                         spec.gpt.vocabulary);
  return label;
}

int run(const Options& o) {
  if (o.device != "cpu" && o.device != "cuda")
    throw std::invalid_argument("--device must be cpu or cuda, not '" + o.device + "'");
#ifndef RINGTRAIN_MODEL_STEP_PERF_CUDA
  if (o.device == "cuda")
    throw std::invalid_argument("--device cuda needs a GPU build (RINGTRAIN_CUDA, see README)");
#endif
  const bool bf16 = std::find(o.precisions.begin(), o.precisions.end(),
                              models::Precision::kBfloat16) != o.precisions.end();
  if (bf16 && (o.device != "cpu" || !models::bf16ProductsSupported()))
    throw std::invalid_argument("--precision bf16 needs --device cpu and a CPU with AVX512-BF16");
  if (o.device == "cuda" && std::find(o.models.begin(), o.models.end(), "gpt") != o.models.end())
    throw std::invalid_argument("--models gpt runs on the CPU only (no GPU transformer layers)");
#ifdef RINGTRAIN_MODEL_STEP_PERF_CUDA
  for (const std::string& path : o.gpuConvolutions) convolutionPath(path);  // refused up front
#endif
  const bool ftz = o.flushToZero && models::enableFlushToZero();
  models::keepMatrixProductsOnOneThread();
  fmt::print("model_step_perf: one thread, Eigen {}.{}.{}, products by {}, flush-to-zero {}\n",
             EIGEN_WORLD_VERSION, EIGEN_MAJOR_VERSION, EIGEN_MINOR_VERSION,
             models::matrixProducts().name, ftz ? "on" : "off");
  Report report(o.json);
  report.header();
  for (const std::string& name : o.models) {
    const models::ModelSpec spec = specFor(name, o);
    models::Model<float> model = models::makeModel<float>(spec);
    const bool gpt = name == "gpt";
    const Index batch = gpt ? o.gptBatch : o.batch;
    const SyntheticBatch data =
        makeBatch(spec.input.size(), batch, gpt ? spec.gpt.vocabulary : spec.classes, gpt);
    const double flops = model.trainingFlopsPerSample() * static_cast<double>(batch);
    const std::string label = labelFor(spec);
#ifdef RINGTRAIN_MODEL_STEP_PERF_CUDA
    if (o.device == "cuda") {
      const bool convolutions = name == "cnn";
      const std::vector<std::string> paths =
          convolutions ? o.gpuConvolutions : std::vector<std::string>{"fastest"};
      for (const std::string& path : paths)
        report.row(label + " GPU step" + (convolutions ? " (" + path + ")" : ""),
                   models::Precision::kFloat32, batch, model.parameterCount(), flops,
                   timeGpuModel(model, data, o, path));
      continue;
    }
#endif
    const std::vector<Timing> steps = timeModel(model, data, batch, o);
    for (std::size_t v = 0; v < steps.size(); ++v)
      report.row(label + " step", o.precisions[v], batch, model.parameterCount(), flops, steps[v]);
    if (o.layerTimes) reportLayerTimes(model, {data.inputs, data.labels, {}}, o);
    if (o.stageTimes)
      reportStageTimes(model, {data.inputs, data.labels, {}}, flops, label, o, report);
    if (name == "mlp" && o.precisions.front() == models::Precision::kFloat32) {
      std::vector<Index> widths{spec.input.size()};
      widths.insert(widths.end(), o.hidden.begin(), o.hidden.end());
      widths.push_back(spec.classes);
      const Timing bare = timeBareProducts(widths, data, o);
      report.row("  bare products only", models::Precision::kFloat32, batch, model.parameterCount(),
                 flops, bare);
      fmt::print(
          "  the rest of the step (bias, ReLU, loss, callbacks): {:.1f}% of its time\n",
          100 * (steps.front().medianSeconds - bare.medianSeconds) / steps.front().medianSeconds);
    }
  }
  if (o.gemm > 0 && o.device == "cpu") reportBareProduct(o.gemm, o, report);
  return 0;
}

}  // namespace
}  // namespace ringtrain

int main(int argc, char** argv) {
  ringtrain::Options options;
  bool help = false;
  if (const auto error = ringtrain::parseOptions(argc, argv, options, help)) {
    std::cerr << "model_step_perf: " << *error << "\n";
    return 2;
  }
  if (help) return 0;
  try {
    return ringtrain::run(options);
  } catch (const std::exception& e) {
    std::cerr << "model_step_perf: " << e.what() << "\n";
    return 1;
  }
}
