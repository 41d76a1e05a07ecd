#include "training/evaluation.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <span>
#include <vector>

#include "data/sharded_sampler.h"

namespace ringtrain::training {

models::Batch<float> batchView(const HostBatch& gathered, const BatchSource& data) {
  models::Batch<float> batch;
  batch.inputs = gathered.inputs;
  if (data.classes() > 0) {
    batch.labels = {gathered.labels.data(),
                    gathered.samples * static_cast<std::size_t>(data.labelsPerSample())};
  } else {
    batch.values = {gathered.values.data(), gathered.samples};
  }
  return batch;
}

models::BatchResult evaluateTestSet(const BatchSource& test, std::int64_t samples, int batchSize,
                                    collectives::Communicator& comm,
                                    const BatchEvaluator& evaluate) {
  const std::int64_t size = test.size();
  const data::IndexRange shard = data::contiguousShard(samples, comm.rank(), comm.size());
  const auto chunk = static_cast<std::int64_t>(std::max(batchSize, 256));
  HostBatch gathered;
  std::vector<std::int64_t> indices;
  models::BatchResult local;
  for (std::int64_t begin = shard.begin; begin < shard.end; begin += chunk) {
    const std::int64_t end = std::min(shard.end, begin + chunk);
    indices.clear();
    for (std::int64_t i = begin; i < end; ++i)
      indices.push_back(samples == size ? i : i * size / samples);
    gatherBatch(test, indices, gathered);
    local.add(evaluate(batchView(gathered, test)));
  }
  // Counts are exact in float64 far beyond any test set.
  std::array<double, 4> totals = {local.lossSum, static_cast<double>(local.correct),
                                  static_cast<double>(local.samples),
                                  static_cast<double>(local.predictions)};
  comm.allreduce(std::span<double>(totals), collectives::ReduceOp::kSum);
  models::BatchResult global;
  global.lossSum = totals[0];
  global.correct = static_cast<std::int64_t>(totals[1]);
  global.samples = static_cast<models::Index>(totals[2]);
  global.predictions = static_cast<std::int64_t>(totals[3]);
  return global;
}

EvaluationKind evaluationKind(std::int64_t tokensPerSample, const BatchSource& data) {
  if (tokensPerSample > 0) return EvaluationKind::kLanguageModel;
  return data.classes() > 0 ? EvaluationKind::kClassification : EvaluationKind::kRegression;
}

std::string evaluationLine(const models::BatchResult& result, EvaluationKind kind,
                           std::int64_t step, std::int64_t epoch) {
  const std::string at = step >= 0 ? fmt::format(" at step {}", step) : "";
  const std::string epochPart = epoch >= 0 ? fmt::format("epoch {}, ", epoch) : "";
  switch (kind) {
    case EvaluationKind::kLanguageModel:
      return fmt::format(
          "Validation loss{}: {:.4f}  (perplexity {:.1f}, token accuracy {:.4f}, {}{} sequences)",
          at, result.meanLoss(), std::exp(result.meanLoss()), result.accuracy(), epochPart,
          result.samples);
    case EvaluationKind::kClassification:
      return fmt::format("Accuracy{}: {:.4f}  (test loss {:.4f}, {}{} test samples)", at,
                         result.accuracy(), result.meanLoss(), epochPart, result.samples);
    case EvaluationKind::kRegression:
      break;
  }
  return fmt::format("Test loss{}: {:.6f}  ({}{} test samples)", at, result.meanLoss(), epochPart,
                     result.samples);
}

}  // namespace ringtrain::training
