// Trainer: data-parallel training of one model on one communicator.
//
// Every rank holds the whole model. Rank 0 initialises the weights and broadcasts them; then,
// every step, each rank runs forward and backward on its own shard of the batch, the ranks
// average their gradients with one all-reduce of the flat gradient buffer, and each applies the
// same optimiser step, so the replicas stay identical to the bit. With N ranks and batch B per
// rank this is exactly training with batch N*B on one rank (the sampler gives the ranks the same
// samples, and the loss is a per-batch mean).
#pragma once

#include <cstdint>
#include <memory>

#include "collectives/aligned_buffer.h"
#include "collectives/communicator.h"
#include "data/sharded_sampler.h"
#include "models/model.h"
#include "models/model_factory.h"
#include "src/trainer/batch_source.h"
#include "src/trainer/config.h"
#include "src/trainer/lr_schedule.h"
#include "src/trainer/optimizer.h"

namespace ringtrain {

struct TrainingSummary {
  std::int64_t steps = 0;
  double trainingSeconds = 0;  // the steps alone, evaluation excluded
  double wallSeconds = 0;
  double samplesPerSecond = 0;  // all ranks together, over the training time
  double samplesPerSecondPerRank = 0;
  double lastTrainingLoss = 0;  // mean over the last logging window, all ranks
  models::BatchResult lastEvaluation;
  bool replicasIdentical = true;  // parameter fingerprints equal on every rank at the end
  // Where rank 0's step time went, in seconds.
  double dataSeconds = 0;           // gathering batches
  double computeSeconds = 0;        // forward and backward
  double communicationSeconds = 0;  // averaging gradients
  double optimizerSeconds = 0;
};

class Trainer {
 public:
  // `log` makes rank 0 print progress; tests turn it off.
  Trainer(const TrainConfig& config, const BatchSource& train, const BatchSource& test,
          collectives::Communicator& communicator, bool log = true);

  TrainingSummary run();
  // The test set, sharded across ranks; counts added up over all ranks.
  models::BatchResult evaluate();

  models::Model<float>& model() { return model_; }
  std::int64_t plannedSteps() const { return plannedSteps_; }

 private:
  void trainStep(std::int64_t step);
  void log(const std::string& line) const;
  bool isClassification() const { return train_.classes() > 0; }

  TrainConfig config_;
  const BatchSource& train_;
  const BatchSource& test_;
  collectives::Communicator& comm_;
  bool log_;
  models::Model<float> model_;
  data::ShardedSampler sampler_;
  std::unique_ptr<Optimizer> optimizer_;
  LrScheduleOptions schedule_;
  std::int64_t plannedSteps_ = 0;
  std::int64_t stepsPerEpoch_ = 0;
  // The averaged gradients, reduced out of place into a persistent huge-page buffer: in place the
  // ring overwrites lines the other rank has just read (allreduce_perf, 2 ranks, 2.7 MB: 0.30 ms
  // in place against 0.17 out of place; in training it gained 3% samples/s).
  collectives::AlignedBuffer averaged_;
  std::vector<float> inputs_;
  std::vector<std::int32_t> labels_;
  std::vector<float> values_;
  double dataSeconds_ = 0;
  double computeSeconds_ = 0;
  double communicationSeconds_ = 0;
  double optimizerSeconds_ = 0;
  double windowLoss_ = 0;  // sum of this rank's per-sample losses since the last log line
  std::int64_t windowSamples_ = 0;
};

// The model spec of a configuration and the data it trains on.
models::ModelSpec modelSpecFor(const TrainConfig& config, const BatchSource& train);

}  // namespace ringtrain
