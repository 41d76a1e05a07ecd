// Evaluation on the test set, shared by the training loop (Trainer::evaluate) and `ringtrain eval`
// (eval_command.h), so that a checkpoint evaluated alone gives the run's own figures.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "collectives/communicator.h"
#include "models/model.h"
#include "training/batch_source.h"

namespace ringtrain::training {

// A gathered batch as a model takes it: labels or regression targets by the data.
models::Batch<float> batchView(const HostBatch& gathered, const BatchSource& data);

// One chunk's loss and accuracy, from the host model or the GPU's.
using BatchEvaluator = std::function<models::BatchResult(const models::Batch<float>&)>;

// Collective over `comm`: the loss and accuracy of `samples` test samples (all of them, or that
// many spread evenly, sample j·size/samples), summed over the ranks. Each rank evaluates a
// contiguous shard in chunks of max(batchSize, 256) samples.
models::BatchResult evaluateTestSet(const BatchSource& test, std::int64_t samples, int batchSize,
                                    collectives::Communicator& comm,
                                    const BatchEvaluator& evaluate);

// What the figures of an evaluation are: a language model's (validation loss, perplexity, token
// accuracy), a classifier's (accuracy, test loss) or a regression's (test loss).
enum class EvaluationKind { kLanguageModel, kClassification, kRegression };
EvaluationKind evaluationKind(std::int64_t tokensPerSample, const BatchSource& data);

// The log line of an evaluation after `step` steps, as training prints it: "Accuracy at step
// 300: 0.9712  (test loss 0.0931, epoch 2, 10000 test samples)"; a `step` or `epoch` below 0 is
// left out.
std::string evaluationLine(const models::BatchResult& result, EvaluationKind kind,
                           std::int64_t step, std::int64_t epoch);

}  // namespace ringtrain::training
