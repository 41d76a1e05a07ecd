// Optimisers: one vectorised loop over the flat parameter and gradient buffers.
//
// The update rules are PyTorch's, so results can be compared with it: SGD with momentum
// (v = mu*v + g, dampening 0), optional Nesterov (step along g + mu*v), weight decay added to
// the gradient; Adam with bias correction and L2 weight decay added to the gradient; AdamW with
// decoupled decay (p -= lr*wd*p before the Adam step).
//
// With ZeRO-1 (--zero 1) a rank's optimiser keeps state for its shards of the parameters only
// (StateIndex): updates name global elements, which it maps to its own arrays.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "base/named_values.h"

namespace ringtrain::training {

enum class OptimizerKind { kSgd, kAdam, kAdamW };
inline constexpr NamedValue<OptimizerKind> kOptimizerNames[] = {
    {OptimizerKind::kSgd, "sgd"}, {OptimizerKind::kAdam, "adam"}, {OptimizerKind::kAdamW, "adamw"}};

struct OptimizerOptions {
  OptimizerKind kind = OptimizerKind::kSgd;
  float momentum = 0.9f;
  bool nesterov = false;
  float weightDecay = 0.0f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float epsilon = 1e-8f;
  // [begin, end) element ranges that weight decay leaves alone (a GPT's biases and LayerNorm
  // gains, as GPT-2 recipes decay matrices and embeddings only); sorted, not overlapping.
  std::vector<std::pair<std::size_t, std::size_t>> undecayed{};
};

// Which elements of the flat parameter buffer an optimiser keeps state for, and where in its
// arrays: all of them (element i at i), or with ZeRO-1 this rank's shards, one after another.
class StateIndex {
 public:
  // Global elements [begin, end), kept from `local` on.
  struct Run {
    std::size_t begin = 0;
    std::size_t end = 0;
    std::size_t local = 0;
  };
  // Every element of a buffer of `parameters`.
  explicit StateIndex(std::size_t parameters);
  // The ranges [begin, end), sorted and not overlapping (empty ones are left out); throws
  // std::invalid_argument otherwise.
  explicit StateIndex(const std::vector<std::pair<std::size_t, std::size_t>>& owned);

  std::size_t size() const { return size_; }  // elements per state array
  std::span<const Run> runs() const { return runs_; }
  // Calls part(begin, end, local) for the pieces of [begin, end) in consecutive runs; throws
  // std::out_of_range naming the first element that is not kept here.
  void forEachPiece(std::size_t begin, std::size_t end,
                    const std::function<void(std::size_t, std::size_t, std::size_t)>& part) const;

 private:
  std::vector<Run> runs_;
  std::size_t size_ = 0;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // Updates parameters[begin, end) from gradients[begin, end): the engine may update a bucket
  // as soon as its gradients are averaged. A step is complete when every element has been
  // updated once; finishStep() then advances the step count (Adam's bias correction).
  virtual void update(std::span<float> parameters, std::span<const float> gradients,
                      std::size_t begin, std::size_t end, float learningRate) = 0;
  void step(std::span<float> parameters, std::span<const float> gradients, float learningRate) {
    update(parameters, gradients, 0, parameters.size(), learningRate);
    finishStep();
  }
  virtual void finishStep() { ++steps_; }
  std::int64_t steps() const { return steps_; }
  // Resuming from a checkpoint: the step count the saved optimiser had reached.
  void restoreSteps(std::int64_t steps) { steps_ = steps; }
  // The optimiser's state (momentum, moments): arrays of one value per parameter, for
  // checkpoints.
  virtual std::vector<std::span<float>> state() { return state_; }
  // The bytes of state() on this rank (with ZeRO-1: its shards').
  std::size_t stateBytes();

 protected:
  // `arrays` state arrays of `parameters` zeros each.
  void allocateState(std::size_t arrays, std::size_t parameters);
  float* stateArray(std::size_t array) const { return state_[array].data(); }
  // Calls part(b, e, decays) for consecutive pieces of [begin, end), decays false inside
  // `undecayed` ranges.
  static void forEachDecayPart(const std::vector<std::pair<std::size_t, std::size_t>>& undecayed,
                               std::size_t begin, std::size_t end,
                               const std::function<void(std::size_t, std::size_t, bool)>& part);

  std::int64_t steps_ = 0;

 private:
  std::vector<float> owned_;  // every state array, one after another
  std::vector<std::span<float>> state_;
};

// A host optimiser with state for the elements of `index`, or for all `parameters`.
std::unique_ptr<Optimizer> makeOptimizer(const OptimizerOptions& options, const StateIndex& index);
std::unique_ptr<Optimizer> makeOptimizer(const OptimizerOptions& options, std::size_t parameters);

}  // namespace ringtrain::training
