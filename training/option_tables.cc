// Every option of `ringtrain train` and `generate`, each declared once (see
// options/option_table.h for what is derived from these tables).
#include <fmt/format.h>

#include "options/exchange_settings.h"
#include "training/config.h"

namespace ringtrain::training {
namespace {

using options::Agreement;
using options::Range;
constexpr Agreement kCompared = Agreement::kCompared;
constexpr Agreement kPresence = Agreement::kPresenceCompared;
constexpr Agreement kPerRank = Agreement::kPerRank;
constexpr bool kSaved = true;

using TrainOption = options::Option<TrainConfig>;

// --model: a kind, or a GPT preset (gpt-mini, gpt2-124m) which also sets the GPT's sizes.
TrainOption modelOption() {
  TrainOption option;
  option.name = "model";
  option.help = joinNames(kModelNames, " | ", " | ") + " | " +
                joinNames(kGptPresetNames, " | ", " | ") +
                " (gpt-mini: 4 layers, 4 heads, width 256, context 128; gpt2-124m: 12, 12, 768, "
                "1024; both with GPT-2's vocabulary of 50257; gpt is gpt-mini)";
  option.read = [](TrainConfig& c, const std::string& text) -> std::optional<std::string> {
    if (const auto preset = valueIn(kGptPresetNames, text)) {
      c.model = ModelKind::kGpt;
      c.gpt = presetShape(*preset);
    } else if (const auto kind = valueIn(kModelNames, text)) {
      c.model = *kind;
      if (c.model == ModelKind::kGpt) c.gpt = presetShape(GptPreset::kMini);
    } else {
      return fmt::format("--model '{}': expected {}, {}", text, joinNames(kModelNames, ", ", ", "),
                         joinNames(kGptPresetNames, ", ", " or "));
    }
    return std::nullopt;
  };
  option.write = [](const TrainConfig& c) { return std::string(nameIn(kModelNames, c.model)); };
  for (const auto& entry : kModelNames)
    option.choices.emplace_back(entry.name);
  for (const auto& entry : kGptPresetNames)
    option.choices.emplace_back(entry.name);
  return option;
}

// A GPT size (--layers ...): only with --model gpt, listed after --model so that it changes the
// preset's size.
template <class Field>
TrainOption gptSize(std::string name, Field field, std::string help) {
  TrainOption option = options::number<TrainConfig>(name, field, options::kPositive, help);
  const auto readNumber = option.read;
  option.read = [name, readNumber](TrainConfig& c,
                                   const std::string& text) -> std::optional<std::string> {
    if (c.model != ModelKind::kGpt)
      return "--" + name + " is a gpt option: use it with --model gpt";
    return readNumber(c, text);
  };
  option.applies = [](const TrainConfig& c) { return c.model == ModelKind::kGpt; };
  return option;
}

// --synthetic-shape C,H,W (28x28x1 spelled with x works too).
TrainOption syntheticShapeOption() {
  TrainOption option = options::intList<TrainConfig>(
      "synthetic-shape", RINGTRAIN_FIELD(syntheticShape), "1,28,28", "synthetic image shape C,H,W");
  option.read = [](TrainConfig& c, const std::string& text) -> std::optional<std::string> {
    std::string shape = text;
    std::replace(shape.begin(), shape.end(), 'x', ',');
    const auto parsed = parseIntList(shape);
    if (!parsed || parsed->size() != 3)
      return "--synthetic-shape '" + text + "': expected C,H,W like 1,28,28";
    c.syntheticShape = *parsed;
    return std::nullopt;
  };
  return option;
}

// An option that was removed: any use is an error naming what replaced it.
template <class Config>
options::Option<Config> removed(std::string name, std::string message) {
  options::Option<Config> option;
  option.name = std::move(name);
  option.hidden = true;
  option.agreement = kPerRank;
  option.read = [message](Config&, const std::string&) -> std::optional<std::string> {
    return message;
  };
  option.write = [](const Config&) { return std::string(); };
  return option;
}

options::Table<TrainConfig> modelAndDataOptions() {
  const std::string group = "Model and data";
  // clang-format off
  return {
      with(modelOption(), group, kCompared, kSaved),
      with(options::intList<TrainConfig>("hidden", RINGTRAIN_FIELD(hidden), "512,512", "mlp hidden layer sizes, comma-separated"), group, kCompared, kSaved),
      with(gptSize("layers", RINGTRAIN_FIELD(gpt.layers), "gpt: transformer blocks"), group, kCompared, kSaved),
      with(gptSize("heads", RINGTRAIN_FIELD(gpt.heads), "gpt: attention heads (divide --width)"), group, kCompared, kSaved),
      with(gptSize("width", RINGTRAIN_FIELD(gpt.width), "gpt: embedding width C"), group, kCompared, kSaved),
      with(gptSize("context", RINGTRAIN_FIELD(gpt.context), "gpt: tokens per sequence T"), group, kCompared, kSaved),
      with(gptSize("vocab", RINGTRAIN_FIELD(gpt.vocabulary), "gpt: vocabulary size (the token files' ids must lie below it)"), group, kCompared, kSaved),
      // A path on each node; the data it holds is compared at start.
      with(options::text<TrainConfig>("data", RINGTRAIN_FIELD(dataDir), "folder with train.h5 and test.h5 (ringtrain's HDF5 layout; idx_to_hdf5 writes it), or else the MNIST IDX files (plain or .gz; data/fetch_mnist.sh)"), group, kPerRank, kSaved),
      with(options::boolean<TrainConfig>("synthetic", RINGTRAIN_FIELD(synthetic), "train on synthetic data (a throughput benchmark)"), group, kCompared, kSaved),
      with(syntheticShapeOption(), group, kCompared, kSaved),
      with(options::number<TrainConfig>("synthetic-classes", RINGTRAIN_FIELD(syntheticClasses), {.min = 2}, "synthetic number of classes"), group, kCompared, kSaved),
      with(options::number<TrainConfig>("synthetic-size", RINGTRAIN_FIELD(syntheticSize), options::kPositive, "synthetic training samples"), group, kCompared, kSaved),
      with(options::boolean<TrainConfig>("drop-last", RINGTRAIN_FIELD(dropLast), "drop each epoch's last, smaller batch"), group, kCompared, kSaved),
      // A thread of the rank's own: no collective depends on it.
      with(options::choice<TrainConfig>("prefetch", RINGTRAIN_FIELD(prefetch), kPrefetchNames, "gather the next batch on a thread of its own while the step trains (auto: on with --device cuda or HDF5 data, off for data in memory on the CPU, where the thread would only take time from the rank's core)"), group, kPerRank),
  };
  // clang-format on
}

options::Table<TrainConfig> runOptions() {
  const std::string group = "Run";
  // clang-format off
  return {
      with(options::number<TrainConfig>("epochs", RINGTRAIN_FIELD(epochs), options::kPositive, "passes over the training data"), group, kCompared, kSaved),
      with(options::number<TrainConfig>("steps", RINGTRAIN_FIELD(steps), options::kNotNegative, "stop after this many steps (0: run all epochs)"), group, kCompared, kSaved),
      with(options::number<TrainConfig>("batch-size", RINGTRAIN_FIELD(batchSize), options::kPositive, "samples per rank per micro-batch (per step without --accumulate-steps)"), group, kCompared, kSaved),
      with(options::number<TrainConfig>("accumulate-steps", RINGTRAIN_FIELD(accumulateSteps), options::kPositive, "micro-batches whose gradients are summed before one average and one optimiser step (a step trains on accumulate-steps x batch-size samples per rank)"), group, kCompared, kSaved),
      with(options::number<TrainConfig>("seed", RINGTRAIN_FIELD(seed), options::kAny, "seed of the initial weights and the data order"), group, kCompared, kSaved),
      with(options::number<TrainConfig>("eval-every", RINGTRAIN_FIELD(evalEvery), options::kNotNegative, "also evaluate every N steps (0: at each epoch's end only)"), group, kCompared, kSaved),
      with(options::number<TrainConfig>("eval-samples", RINGTRAIN_FIELD(evalSamples), {.min = 0, .hint = " (0: all)"}, "evaluate on N test samples spread over the test set, e.g. validation sequences; the run's last evaluation takes all (0: all, always)"), group, kCompared, kSaved),
      with(options::number<TrainConfig>("log-every", RINGTRAIN_FIELD(logEvery), options::kNotNegative, "log the training loss every N steps"), group, kCompared, kSaved),
      with(options::choice<TrainConfig>("device", RINGTRAIN_FIELD(device), kDeviceNames, "train on the CPU or on one GPU per rank; auto takes cuda when the build has the GPU path and every node has a GPU for each of its ranks"), group, kCompared, kSaved),
      with(options::boolean<TrainConfig>("tf32", RINGTRAIN_FIELD(tf32), "cuda: TF32 tensor-core matrix products (faster, with a larger rounding error in the products)"), group, kCompared, kSaved),
      with(options::choice<TrainConfig>("gpu-convolutions", RINGTRAIN_FIELD(gpuConvolutions), models::kConvolutionPathNames, "cuda: how convolutions run; fastest times im2col + cuBLAS, cuDNN on channels-last data and cuDNN on channels-first copies (where the build has cuDNN) per layer at the start, so the sums may differ from run to run; im2col, cudnn or cudnn-nchw take one path"), group, kPerRank),
      with(options::choice<TrainConfig>("gpu-conv-algorithms", RINGTRAIN_FIELD(gpuConvAlgorithms), models::kConvolutionAlgorithmNames, "cuda: cuDNN's algorithms; plain: those summing plain float32 products, deterministic first; any: the fastest Find times, FFT, Winograd and nondeterministic ones included (as PyTorch's cudnn.benchmark), so the sums may differ from run to run"), group, kPerRank),
      with(options::choice<TrainConfig>("precision", RINGTRAIN_FIELD(precision), models::kPrecisionNames, "the CPU's matrix products: float32, or bfloat16 inputs with float32 accumulation (needs a CPU with AVX512-BF16; weights, optimiser state, loss and softmax stay float32)"), group, kCompared, kSaved),
      with(options::number<TrainConfig>("expect-world-size", RINGTRAIN_FIELD(expectWorldSize), options::kNotNegative, "refuse to run unless mpirun started exactly this many ranks (0: any)"), group, kCompared),
  };
  // clang-format on
}

options::Table<TrainConfig> engineOptions() {
  const std::string group = "Gradient engine";
  options::Table<TrainConfig> table = options::exchangeOptionRows<TrainConfig>(group);
  // clang-format off
  table.push_back(with(options::number<TrainConfig>("zero", RINGTRAIN_FIELD(zero), {.min = 0, .max = 1}, "ZeRO stage: 1 shards the optimiser state over the ranks (each updates its shard of every bucket, then the parameters are all-gathered: the ring's all-reduce in two halves, the same parameters to the bit; backends ring and tuned, on the CPU), 0 keeps all of it on every rank"), group, kCompared, kSaved));
  table.push_back(with(options::choice<TrainConfig>("check-finite", RINGTRAIN_FIELD(checkFinite), kCheckFiniteNames, "stop the job or skip the step on NaN/Inf averaged gradients"), group, kCompared, kSaved));
  // Every rank's trace is gathered to one file: all ranks write one, or none does.
  table.push_back(with(options::text<TrainConfig>("timeline", RINGTRAIN_FIELD(timeline), "write a Chrome trace (Perfetto, chrome://tracing) of every rank to this file"), group, kPresence));
  // clang-format on
  return table;
}

options::Table<TrainConfig> optimiserOptions() {
  const std::string group = "Optimiser";
  const Range unit{.min = 0, .max = 1, .maxOpen = true};
  // clang-format off
  return {
      with(options::choice<TrainConfig>("optimizer", RINGTRAIN_FIELD(optimizer), kOptimizerNames, ""), group, kCompared, kSaved),
      with(options::number<TrainConfig>("lr", RINGTRAIN_FIELD(learningRate), {.min = 0, .minOpen = true}, "learning rate"), group, kCompared, kSaved),
      with(options::number<TrainConfig>("momentum", RINGTRAIN_FIELD(momentum), unit, "sgd momentum"), group, kCompared, kSaved),
      with(options::boolean<TrainConfig>("nesterov", RINGTRAIN_FIELD(nesterov), "sgd: Nesterov momentum"), group, kCompared, kSaved),
      with(options::number<TrainConfig>("weight-decay", RINGTRAIN_FIELD(weightDecay), options::kNotNegative, "L2 penalty (sgd, adam) or decoupled decay (adamw)"), group, kCompared, kSaved),
      with(options::number<TrainConfig>("beta1", RINGTRAIN_FIELD(beta1), unit, "adam: first-moment decay"), group, kCompared, kSaved),
      with(options::number<TrainConfig>("beta2", RINGTRAIN_FIELD(beta2), unit, "adam: second-moment decay"), group, kCompared, kSaved),
      with(options::number<TrainConfig>("epsilon", RINGTRAIN_FIELD(epsilon), {.min = 0, .minOpen = true}, "adam: denominator term"), group, kCompared, kSaved),
      with(options::choice<TrainConfig>("lr-schedule", RINGTRAIN_FIELD(lrSchedule), kLrScheduleNames, ""), group, kCompared, kSaved),
      with(options::number<TrainConfig>("warmup-steps", RINGTRAIN_FIELD(warmupSteps), options::kNotNegative, "linear warm-up steps"), group, kCompared, kSaved),
      with(options::number<TrainConfig>("lr-step-size", RINGTRAIN_FIELD(lrStepSize), options::kPositive, "step schedule: steps between decays"), group, kCompared, kSaved),
      with(options::number<TrainConfig>("lr-gamma", RINGTRAIN_FIELD(lrGamma), {.min = 0, .max = 1, .minOpen = true}, "step schedule: decay factor"), group, kCompared, kSaved),
      with(options::number<TrainConfig>("clip-grad-norm", RINGTRAIN_FIELD(clipGradNorm), {.min = 0, .hint = " (0: off)"}, "scale the averaged gradients down to this global L2 norm when above it, the same on every rank (0: off)"), group, kCompared, kSaved),
      with(options::boolean<TrainConfig>("scale-lr", RINGTRAIN_FIELD(scaleLr), "multiply the learning rate by the number of ranks"), group, kCompared, kSaved),
  };
  // clang-format on
}

options::Table<TrainConfig> storageOptions() {
  const std::string group = "Checkpoints, resume, logs, SIGTERM";
  // clang-format off
  return {
      // Rank 0 writes; whether checkpoints are written shapes every rank's steps (the NaN scan
      // before each save is collective), so all ranks give it or none does.
      with(options::text<TrainConfig>("checkpoint-dir", RINGTRAIN_FIELD(checkpointDir), "rank 0 writes checkpoints (ckpt-<step>.h5, `latest`) to this folder, which it locks for the run and checks for writing at start"), group, kPresence, kSaved),
      with(options::number<TrainConfig>("checkpoint-every", RINGTRAIN_FIELD(checkpointEvery), options::kNotNegative, "steps between checkpoints (0: at each epoch's end); one more at the end and on SIGTERM"), group, kCompared, kSaved),
      // Only rank 0's value is used (it prunes, resumes, reads and broadcasts).
      with(options::number<TrainConfig>("keep", RINGTRAIN_FIELD(keep), {.min = 0, .hint = " (0 keeps every checkpoint)"}, "checkpoints kept, the newest (0: all)"), group, kPerRank, kSaved),
      with(options::text<TrainConfig>("resume", RINGTRAIN_FIELD(resume), "none | auto (the newest good checkpoint of --checkpoint-dir; none there: start afresh) | a checkpoint file or folder"), group, kPerRank),
      with(options::text<TrainConfig>("init-from", RINGTRAIN_FIELD(initFrom), "start from the weights of this safetensors file (ringtrain export): rank 0 reads it, every rank takes them; with --resume auto only when --checkpoint-dir holds no checkpoint yet"), group, kPerRank),
      with(options::choice<TrainConfig>("on-resize", RINGTRAIN_FIELD(onResize), kOnResizeNames, "resumed on another number of ranks, keep the saved global batch (batch per rank = saved global batch / ranks) or the batch per rank (lr scaled by new/saved global batch)"), group, kPerRank, kSaved),
      with(options::text<TrainConfig>("logdir", RINGTRAIN_FIELD(logdir), "rank 0 writes TensorBoard event files (train/, test/) and metrics.jsonl here"), group, kPerRank, kSaved),
      with(options::choice<TrainConfig>("log-level", RINGTRAIN_FIELD(logLevel), kLogLevelNames, "the lines shown: errors only, also warnings, also progress, also every rank's details"), group, kPerRank),
      with(options::text<TrainConfig>("log-file", RINGTRAIN_FIELD(logFile), "each rank appends its lines, time-stamped, to this file: %r the rank, %h the host, %% a percent sign (e.g. logs/train-%r.log); the terminal then keeps rank 0's lines and every rank's errors"), group, kPerRank),
      // Every rank takes part in the per-step SIGTERM check, or none does.
      with(options::number<TrainConfig>("sigterm-grace", RINGTRAIN_FIELD(sigtermGraceSeconds), {.min = 0, .hint = " (a number of seconds; 0: SIGTERM kills at once)"}, "on SIGTERM the ranks agree on a step, write a final checkpoint and exit within this many seconds (0: SIGTERM kills at once)"), group, kCompared, kSaved),
      with(options::number<TrainConfig>("sigterm-exit-code", RINGTRAIN_FIELD(sigtermExitCode), {.min = 0, .max = 255}, "exit status of a run stopped by SIGTERM (143: rerun with --resume auto; 0: report success)"), group, kCompared),
  };
  // clang-format on
}

// Test-only fault injection (hidden): given to some ranks only, on purpose.
options::Table<TrainConfig> testHookOptions() {
  options::Table<TrainConfig> table = {
      options::number<TrainConfig>("test-stall-rank", RINGTRAIN_FIELD(test.stallRank),
                                   options::kAny, ""),
      options::number<TrainConfig>("test-stall-collective", RINGTRAIN_FIELD(test.stallCollective),
                                   options::kAny, ""),
      options::number<TrainConfig>("test-stall-seconds", RINGTRAIN_FIELD(test.stallSeconds),
                                   options::kAny, ""),
      options::number<TrainConfig>("test-nan-step", RINGTRAIN_FIELD(test.nanStep), options::kAny,
                                   ""),
      options::number<TrainConfig>("test-step-sleep-ms", RINGTRAIN_FIELD(test.stepSleepMs),
                                   options::kNotNegative, ""),
      options::choice<TrainConfig>("test-fail-at", RINGTRAIN_FIELD(test.failAt), kFailurePointNames,
                                   ""),
      options::number<TrainConfig>("test-fail-rank", RINGTRAIN_FIELD(test.failRank), options::kAny,
                                   ""),
      options::number<TrainConfig>("test-fail-step", RINGTRAIN_FIELD(test.failStep), options::kAny,
                                   ""),
      options::boolean<TrainConfig>("test-no-avx512-bf16", RINGTRAIN_FIELD(test.noAvx512Bf16), ""),
      removed<TrainConfig>("shm-parameters",
                           "--shm-parameters was removed: --backend shm keeps a copy of the "
                           "parameters on every rank; drop the option"),
  };
  for (TrainOption& option : table) {
    option.group = "Test hooks";
    option.hidden = true;
    option.agreement = kPerRank;
  }
  return table;
}

}  // namespace

const options::Table<TrainConfig>& trainOptionTable() {
  static const options::Table<TrainConfig> table = [] {
    options::Table<TrainConfig> all;
    for (auto&& part : {modelAndDataOptions(), runOptions(), engineOptions(), optimiserOptions(),
                        storageOptions(), testHookOptions()}) {
      all.insert(all.end(), part.begin(), part.end());
    }
    return all;
  }();
  return table;
}

const options::Table<GenerationOptions>& generateOptionTable() {
  static const options::Table<GenerationOptions> table = [] {
    const std::string group = "ringtrain generate: text from a trained GPT checkpoint";
    options::Option<GenerationOptions> checkpoint = options::text<GenerationOptions>(
        "checkpoint", RINGTRAIN_FIELD(checkpoint),
        "a checkpoint of --model gpt (ckpt-<step>.h5), or its folder (the newest good one)");
    checkpoint.required = true;
    // clang-format off
    options::Table<GenerationOptions> all = {
        checkpoint,
        options::text<GenerationOptions>("prompt", RINGTRAIN_FIELD(prompt), "the text to continue (empty: start a new text); a prompt longer than the model's context is cut to its last context tokens (said on stderr), as each new token sees only the last context tokens"),
        options::text<GenerationOptions>("vocab-dir", RINGTRAIN_FIELD(vocabulary), "folder with GPT-2's encoder.json and vocab.bpe (data/fetch_gpt2_vocab.sh)"),
        options::number<GenerationOptions>("tokens", RINGTRAIN_FIELD(tokens), options::kPositive, "new tokens per sample"),
        options::number<GenerationOptions>("temperature", RINGTRAIN_FIELD(temperature), {.min = 0, .rule = "must be a finite number of at least 0"}, "softmax temperature (0: always the most likely token)"),
        options::number<GenerationOptions>("top-k", RINGTRAIN_FIELD(topK), {.min = 0, .hint = " (0: all tokens)"}, "draw from the k most likely tokens (0: all)"),
        options::number<GenerationOptions>("samples", RINGTRAIN_FIELD(samples), options::kPositive, "texts to draw"),
        options::number<GenerationOptions>("seed", RINGTRAIN_FIELD(seed), options::kAny, "seed of the draws"),
    };
    // clang-format on
    // One process, no MPI: nothing to agree on.
    for (auto& option : all) {
      option.group = group;
      option.agreement = kPerRank;
    }
    return all;
  }();
  return table;
}

}  // namespace ringtrain::training
