#include "training/optimizer.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "base/vector_dispatch.h"

namespace ringtrain::training {
namespace {

// What the host optimisers share: the elements they keep state for (StateIndex) and weight
// decay's ranges. update() cuts [begin, end) into pieces of one run and one decay, each handed to
// the rule as pointers to its first element.
class HostOptimizer : public Optimizer {
 public:
  HostOptimizer(const OptimizerOptions& o, const StateIndex& index)
      : index_(index), weightDecay_(o.weightDecay), undecayed_(o.undecayed) {}

  void update(std::span<float> p, std::span<const float> g, std::size_t begin, std::size_t end,
              float lr) final {
    index_.forEachPiece(begin, end, [&](std::size_t b, std::size_t e, std::size_t local) {
      forEachDecayPart(undecayed_, b, e, [&](std::size_t db, std::size_t de, bool decays) {
        updatePiece(p.data() + db, g.data() + db, local + (db - b), de - db, lr,
                    decays ? weightDecay_ : 0.0f);
      });
    });
  }

 protected:
  // `count` elements from param and grad, whose state starts at element `local` of each array.
  virtual void updatePiece(float* param, const float* grad, std::size_t local, std::size_t count,
                           float lr, float wd) = 0;
  std::size_t stateSize() const { return index_.size(); }

 private:
  StateIndex index_;
  float weightDecay_;
  std::vector<std::pair<std::size_t, std::size_t>> undecayed_;
};

class Sgd final : public HostOptimizer {
 public:
  Sgd(const OptimizerOptions& o, const StateIndex& index)
      : HostOptimizer(o, index), momentum_(o.momentum), nesterov_(o.nesterov) {
    allocateState(1, o.momentum > 0 ? stateSize() : 0);  // no momentum: one empty array
  }

 private:
  void updatePiece(float* param, const float* grad, std::size_t local, std::size_t count, float lr,
                   float wd) override {
    rule(param, grad, momentum_ == 0.0f ? nullptr : stateArray(0) + local, count, lr, wd);
  }

  RINGTRAIN_VECTOR_CLONES void rule(float* __restrict param, const float* __restrict grad,
                                    float* __restrict v, std::size_t count, float lr, float wd) {
    if (v == nullptr) {
#pragma omp simd
      for (std::size_t i = 0; i < count; ++i)
        param[i] -= lr * (grad[i] + wd * param[i]);
      return;
    }
    const float mu = momentum_;
    // PyTorch: the first step's velocity is the gradient itself; with v starting at 0 and no
    // dampening, mu*0 + g gives the same.
    if (nesterov_) {
#pragma omp simd
      for (std::size_t i = 0; i < count; ++i) {
        const float d = grad[i] + wd * param[i];
        v[i] = mu * v[i] + d;
        param[i] -= lr * (d + mu * v[i]);
      }
    } else {
#pragma omp simd
      for (std::size_t i = 0; i < count; ++i) {
        v[i] = mu * v[i] + grad[i] + wd * param[i];
        param[i] -= lr * v[i];
      }
    }
  }

  float momentum_;
  bool nesterov_;
};

class Adam final : public HostOptimizer {
 public:
  Adam(const OptimizerOptions& o, const StateIndex& index, bool decoupled)
      : HostOptimizer(o, index),
        beta1_(o.beta1),
        beta2_(o.beta2),
        epsilon_(o.epsilon),
        decoupled_(decoupled) {
    allocateState(2, stateSize());
  }

 private:
  void updatePiece(float* param, const float* grad, std::size_t local, std::size_t count, float lr,
                   float wd) override {
    rule(param, grad, stateArray(0) + local, stateArray(1) + local, count, lr, wd);
  }

  RINGTRAIN_VECTOR_CLONES void rule(float* __restrict param, const float* __restrict grad,
                                    float* __restrict m, float* __restrict v, std::size_t count,
                                    float lr, float wd) {
    const double t = static_cast<double>(steps_ + 1);
    const float correction1 = static_cast<float>(1.0 - std::pow(beta1_, t));
    const float correction2 = static_cast<float>(1.0 - std::pow(beta2_, t));
    // p -= lr * (m / c1) / (sqrt(v / c2) + eps), folded as PyTorch does it.
    const float stepSize = lr / correction1;
    const float rootCorrection2 = std::sqrt(correction2);
    const float b1 = beta1_, b2 = beta2_, eps = epsilon_;
    const float l2 = decoupled_ ? 0.0f : wd;
    const float decay = decoupled_ ? 1.0f - lr * wd : 1.0f;
#pragma omp simd
    for (std::size_t i = 0; i < count; ++i) {
      const float d = grad[i] + l2 * param[i];
      m[i] = b1 * m[i] + (1.0f - b1) * d;
      v[i] = b2 * v[i] + (1.0f - b2) * d * d;
      const float denominator = std::sqrt(v[i]) / rootCorrection2 + eps;
      param[i] = param[i] * decay - stepSize * m[i] / denominator;
    }
  }

  float beta1_, beta2_, epsilon_;
  bool decoupled_;
};

}  // namespace

void Optimizer::forEachDecayPart(const std::vector<std::pair<std::size_t, std::size_t>>& undecayed,
                                 std::size_t begin, std::size_t end,
                                 const std::function<void(std::size_t, std::size_t, bool)>& part) {
  std::size_t at = begin;
  for (const auto& [first, last] : undecayed) {
    if (last <= at) continue;
    if (first >= end) break;
    if (first > at) part(at, first, true);
    at = std::max(at, first);
    const std::size_t stop = std::min(last, end);
    part(at, stop, false);
    at = stop;
  }
  if (at < end) part(at, end, true);
}

void Optimizer::allocateState(std::size_t arrays, std::size_t parameters) {
  owned_.assign(arrays * parameters, 0.0f);
  state_.clear();
  for (std::size_t a = 0; a < arrays; ++a)
    state_.emplace_back(owned_.data() + a * parameters, parameters);
}

std::size_t Optimizer::stateBytes() {
  std::size_t bytes = 0;
  for (const std::span<float> array : state())
    bytes += array.size_bytes();
  return bytes;
}

StateIndex::StateIndex(std::size_t parameters) : runs_{{0, parameters, 0}}, size_(parameters) {}

StateIndex::StateIndex(const std::vector<std::pair<std::size_t, std::size_t>>& owned) {
  for (const auto& [begin, end] : owned) {
    if (end < begin || (!runs_.empty() && begin < runs_.back().end)) {
      throw std::invalid_argument("optimiser state: the owned ranges must be sorted and disjoint");
    }
    if (end == begin) continue;
    runs_.push_back({begin, end, size_});
    size_ += end - begin;
  }
}

void StateIndex::forEachPiece(
    std::size_t begin, std::size_t end,
    const std::function<void(std::size_t, std::size_t, std::size_t)>& part) const {
  // The first run that ends after `begin`.
  auto run = std::partition_point(runs_.begin(), runs_.end(),
                                  [&](const Run& r) { return r.end <= begin; });
  for (std::size_t at = begin; at < end; ++run) {
    if (run == runs_.end() || run->begin > at) {
      throw std::out_of_range("optimiser state: element " + std::to_string(at) +
                              " is not in this rank's shard");
    }
    const std::size_t stop = std::min(end, run->end);
    part(at, stop, run->local + (at - run->begin));
    at = stop;
  }
}

std::unique_ptr<Optimizer> makeOptimizer(const OptimizerOptions& options, const StateIndex& index) {
  switch (options.kind) {
    case OptimizerKind::kSgd:
      break;
    case OptimizerKind::kAdam:
      return std::make_unique<Adam>(options, index, false);
    case OptimizerKind::kAdamW:
      return std::make_unique<Adam>(options, index, true);
  }
  return std::make_unique<Sgd>(options, index);
}

std::unique_ptr<Optimizer> makeOptimizer(const OptimizerOptions& options, std::size_t parameters) {
  return makeOptimizer(options, StateIndex(parameters));
}

}  // namespace ringtrain::training
