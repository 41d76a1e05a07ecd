// model_step_perf: how fast one rank computes a training step (forward + backward, with the
// gradient-ready callbacks the engine uses) of the mlp and cnn models, on one thread.
//
// For the mlp the same run also times the bare matrix products of such a step (three forward,
// three weight gradients, two input gradients) as plain Eigen calls on the same shapes: the gap
// between the two rows is everything else a step does (bias, ReLU, loss, bookkeeping).
//
//   build/bin/model_step_perf --batch 64 --hidden 512,512
//   build/bin/model_step_perf --device cuda   (GPU builds: the GPU model on the current device)
//
// On the GPU a step is what the trainer does: copy the batch in, forward, backward, an SGD
// momentum update of the parameters, and wait for the loss (one synchronisation per step).
//
// Each configuration runs --repeats rounds of at least --seconds each and prints the median
// and the best round; GFLOP/s counts the matrix products only.
#include <fmt/format.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <iostream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "models/flush_to_zero.h"
#include "models/matrix_products.h"
#include "models/model_factory.h"
#ifdef RINGTRAIN_MODEL_STEP_PERF_CUDA
#include <cuda_runtime_api.h>

#include "models/cuda/cuda_errors.h"
#include "models/cuda/gpu_model.h"
#include "models/cuda/update_kernels.h"
#endif

namespace ringtrain {
namespace {

namespace po = boost::program_options;
using models::Index;

struct Options {
  Index batch = 64;
  std::vector<Index> hidden{512, 512};
  std::vector<std::string> models{"mlp", "cnn"};
  double seconds = 1.0;
  int repeats = 5;
  bool flushToZero = true;
  std::string device = "cpu";
};

// The comma-separated items of `text`, empty ones skipped.
std::vector<std::string> commaSeparated(const std::string& text) {
  std::vector<std::string> items;
  std::istringstream stream(text);
  for (std::string item; std::getline(stream, item, ',');)
    if (!item.empty()) items.push_back(item);
  return items;
}

// Returns an error message for the first bad option, or nullopt; sets `help` for --help.
std::optional<std::string> parseOptions(int argc, char** argv, Options& o, bool& help) {
  std::string hidden = "512,512", modelList = "mlp,cnn";
  po::options_description description("model_step_perf options");
  description.add_options()("help,h", "print this help")(
      "batch,b", po::value(&o.batch)->default_value(o.batch), "samples per step")(
      "hidden", po::value(&hidden)->default_value(hidden), "mlp hidden widths")(
      "models", po::value(&modelList)->default_value(modelList), "comma-separated: mlp, cnn")(
      "seconds", po::value(&o.seconds)->default_value(o.seconds), "least time per round")(
      "repeats", po::value(&o.repeats)->default_value(o.repeats), "timed rounds")(
      "device", po::value(&o.device)->default_value(o.device), "cpu, or cuda (GPU builds)")(
      "ftz", po::value(&o.flushToZero)->default_value(o.flushToZero),
      "flush denormals to zero (1) or not (0)");
  try {
    po::variables_map vm;
    po::store(po::command_line_parser(argc, argv).options(description).run(), vm);
    po::notify(vm);
    if (vm.count("help")) {
      help = true;
      std::cout << description << "\n";
      return std::nullopt;
    }
  } catch (const po::error& e) {
    return std::string(e.what());
  }
  o.hidden.clear();
  for (const std::string& width : commaSeparated(hidden)) {
    try {
      o.hidden.push_back(std::stol(width));
    } catch (const std::exception&) {
      return "--hidden: '" + width + "' is not a number";
    }
  }
  o.models = commaSeparated(modelList);
  if (o.batch < 1) return "--batch must be at least 1";
  if (o.repeats < 1 || o.seconds <= 0) return "--repeats and --seconds must be positive";
  for (const std::string& m : o.models)
    if (m != "mlp" && m != "cnn") return "--models: unknown model '" + m + "' (mlp, cnn)";
  return std::nullopt;
}

struct Timing {
  double medianSeconds = 0;  // per step
  double bestSeconds = 0;
};

// Runs `step` in rounds of at least `seconds` and returns the median and best time per step.
Timing timeSteps(const std::function<void()>& step, const Options& o) {
  using Clock = std::chrono::steady_clock;
  for (int i = 0; i < 3; ++i)
    step();  // warm-up: first-touch of buffers, caches, the CPU's clock
  std::vector<double> perStep;
  for (int r = 0; r < o.repeats; ++r) {
    const auto start = Clock::now();
    std::int64_t steps = 0;
    double elapsed = 0;
    do {
      step();
      ++steps;
      elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    } while (elapsed < o.seconds);
    perStep.push_back(elapsed / static_cast<double>(steps));
  }
  std::sort(perStep.begin(), perStep.end());
  return {perStep[perStep.size() / 2], perStep.front()};
}

void printHeader() {
  fmt::print("{:<28} {:>6} {:>10} {:>10} {:>12} {:>12} {:>9} {:>9}\n", "what", "batch", "params",
             "ms/step", "samples/s", "best", "GFLOP/s", "best");
}

void printRow(const std::string& what, Index batch, std::size_t params, double flopsPerStep,
              const Timing& t) {
  const auto b = static_cast<double>(batch);
  fmt::print("{:<28} {:>6} {:>10} {:>10.3f} {:>12.0f} {:>12.0f} {:>9.1f} {:>9.1f}\n", what, batch,
             params, t.medianSeconds * 1e3, b / t.medianSeconds, b / t.bestSeconds,
             flopsPerStep / t.medianSeconds * 1e-9, flopsPerStep / t.bestSeconds * 1e-9);
}

// Inputs in [0, 1) and labels, as data/ delivers them.
struct SyntheticBatch {
  std::vector<float> inputs;
  std::vector<std::int32_t> labels;
};

SyntheticBatch makeBatch(Index sampleSize, Index batch, Index classes) {
  SyntheticBatch data;
  models::SplitMix64 generator(42);
  data.inputs.resize(static_cast<std::size_t>(sampleSize * batch));
  for (float& v : data.inputs)
    v = static_cast<float>(0.5 + generator.symmetric(0.5));
  for (Index b = 0; b < batch; ++b)
    data.labels.push_back(static_cast<std::int32_t>(generator.next() % classes));
  return data;
}

Timing timeModel(models::Model<float>& model, const SyntheticBatch& data, const Options& o) {
  model.initialize(1);
  model.reserve(o.batch);
  const models::Batch<float> batch{data.inputs, data.labels, {}};
  std::size_t announced = 0;  // what an engine would hand to its communication thread
  const models::GradientReadyCallback onReady = [&](const models::LayerParameters& layer) {
    announced += layer.count;
  };
  return timeSteps(
      [&] {
        model.forward(batch);
        model.backward(onReady);
      },
      o);
}

#ifdef RINGTRAIN_MODEL_STEP_PERF_CUDA
Timing timeGpuModel(models::Model<float>& model, const SyntheticBatch& data, const Options& o) {
  model.initialize(1);
  models::cuda::GpuModel gpu(model);
  gpu.reserve(o.batch);
  float* velocity = nullptr;
  RINGTRAIN_MODELS_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&velocity), gpu.parameterCount() * sizeof(float)));
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

int run(const Options& o) {
  if (o.device != "cpu" && o.device != "cuda")
    throw std::invalid_argument("--device must be cpu or cuda, not '" + o.device + "'");
#ifndef RINGTRAIN_MODEL_STEP_PERF_CUDA
  if (o.device == "cuda")
    throw std::invalid_argument("--device cuda needs a GPU build (RINGTRAIN_CUDA, see README)");
#endif
  const bool ftz = o.flushToZero && models::enableFlushToZero();
  models::keepMatrixProductsOnOneThread();
  fmt::print("model_step_perf: one thread, Eigen {}.{}.{}, products by {}, flush-to-zero {}\n",
             EIGEN_WORLD_VERSION, EIGEN_MAJOR_VERSION, EIGEN_MINOR_VERSION,
             models::matrixProducts().name, ftz ? "on" : "off");
  printHeader();
  for (const std::string& name : o.models) {
    models::ModelSpec spec{.name = name, .input = {1, 28, 28}, .classes = 10, .hidden = o.hidden};
    models::Model<float> model = models::makeModel<float>(spec);
    const SyntheticBatch data = makeBatch(spec.input.size(), o.batch, spec.classes);
    const double flops = model.trainingFlopsPerSample() * static_cast<double>(o.batch);
    std::string label = name;
    if (name == "mlp") {
      label += " 784";
      for (const Index w : o.hidden)
        label += "-" + std::to_string(w);
      label += "-10";
    }
#ifdef RINGTRAIN_MODEL_STEP_PERF_CUDA
    if (o.device == "cuda") {
      printRow(label + " GPU step", o.batch, model.parameterCount(), flops,
               timeGpuModel(model, data, o));
      continue;
    }
#endif
    const Timing step = timeModel(model, data, o);
    printRow(label + " step", o.batch, model.parameterCount(), flops, step);
    if (name == "mlp") {
      std::vector<Index> widths{spec.input.size()};
      widths.insert(widths.end(), o.hidden.begin(), o.hidden.end());
      widths.push_back(spec.classes);
      const Timing bare = timeBareProducts(widths, data, o);
      printRow("  bare products only", o.batch, model.parameterCount(), flops, bare);
      fmt::print("  the rest of the step (bias, ReLU, loss, callbacks): {:.1f}% of its time\n",
                 100 * (step.medianSeconds - bare.medianSeconds) / step.medianSeconds);
    }
  }
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
