#include "src/trainer/optimizer.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "base/vector_dispatch.h"

namespace ringtrain {
namespace {

class Sgd final : public Optimizer {
 public:
  Sgd(const OptimizerOptions& o, std::size_t n)
      : momentum_(o.momentum),
        nesterov_(o.nesterov),
        weightDecay_(o.weightDecay),
        undecayed_(o.undecayed) {
    allocateState(1, o.momentum > 0 ? n : 0);  // no momentum: one empty array
  }

  void update(std::span<float> p, std::span<const float> g, std::size_t begin, std::size_t end,
              float lr) override {
    forEachDecayPart(undecayed_, begin, end, [&](std::size_t b, std::size_t e, bool decays) {
      updatePart(p, g, b, e, lr, decays ? weightDecay_ : 0.0f);
    });
  }

 private:
  RINGTRAIN_VECTOR_CLONES void updatePart(std::span<float> p, std::span<const float> g,
                                          std::size_t begin,
                  std::size_t end, float lr, float wd) {
    float* __restrict param = p.data();
    const float* __restrict grad = g.data();
    if (momentum_ == 0.0f) {
#pragma omp simd
      for (std::size_t i = begin; i < end; ++i)
        param[i] -= lr * (grad[i] + wd * param[i]);
      return;
    }
    float* __restrict v = stateArray(0);
    const float mu = momentum_;
    // PyTorch: the first step's velocity is the gradient itself; with v starting at 0 and no
    // dampening, mu*0 + g gives the same.
    if (nesterov_) {
#pragma omp simd
      for (std::size_t i = begin; i < end; ++i) {
        const float d = grad[i] + wd * param[i];
        v[i] = mu * v[i] + d;
        param[i] -= lr * (d + mu * v[i]);
      }
    } else {
#pragma omp simd
      for (std::size_t i = begin; i < end; ++i) {
        v[i] = mu * v[i] + grad[i] + wd * param[i];
        param[i] -= lr * v[i];
      }
    }
  }

 private:
  float momentum_;
  bool nesterov_;
  float weightDecay_;
  std::vector<std::pair<std::size_t, std::size_t>> undecayed_;
};

class Adam final : public Optimizer {
 public:
  Adam(const OptimizerOptions& o, std::size_t n, bool decoupled)
      : beta1_(o.beta1),
        beta2_(o.beta2),
        epsilon_(o.epsilon),
        weightDecay_(o.weightDecay),
        decoupled_(decoupled),
        undecayed_(o.undecayed) {
    allocateState(2, n);
  }

  void update(std::span<float> p, std::span<const float> g, std::size_t begin, std::size_t end,
              float lr) override {
    forEachDecayPart(undecayed_, begin, end, [&](std::size_t b, std::size_t e, bool decays) {
      updatePart(p, g, b, e, lr, decays ? weightDecay_ : 0.0f);
    });
  }

 private:
  RINGTRAIN_VECTOR_CLONES void updatePart(std::span<float> p, std::span<const float> g,
                                          std::size_t begin,
                  std::size_t end, float lr, float wd) {
    const double t = static_cast<double>(steps_ + 1);
    const float correction1 = static_cast<float>(1.0 - std::pow(beta1_, t));
    const float correction2 = static_cast<float>(1.0 - std::pow(beta2_, t));
    // p -= lr * (m / c1) / (sqrt(v / c2) + eps), folded as PyTorch does it.
    const float stepSize = lr / correction1;
    const float rootCorrection2 = std::sqrt(correction2);
    float* __restrict param = p.data();
    const float* __restrict grad = g.data();
    float* __restrict m = stateArray(0);
    float* __restrict v = stateArray(1);
    const float b1 = beta1_, b2 = beta2_, eps = epsilon_;
    const float l2 = decoupled_ ? 0.0f : wd;
    const float decay = decoupled_ ? 1.0f - lr * wd : 1.0f;
#pragma omp simd
    for (std::size_t i = begin; i < end; ++i) {
      const float d = grad[i] + l2 * param[i];
      m[i] = b1 * m[i] + (1.0f - b1) * d;
      v[i] = b2 * v[i] + (1.0f - b2) * d * d;
      const float denominator = std::sqrt(v[i]) / rootCorrection2 + eps;
      param[i] = param[i] * decay - stepSize * m[i] / denominator;
    }
  }

 private:
  float beta1_, beta2_, epsilon_, weightDecay_;
  bool decoupled_;
  std::vector<std::pair<std::size_t, std::size_t>> undecayed_;
};

}  // namespace

void Optimizer::forEachDecayPart(
    const std::vector<std::pair<std::size_t, std::size_t>>& undecayed, std::size_t begin,
    std::size_t end, const std::function<void(std::size_t, std::size_t, bool)>& part) {
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

std::unique_ptr<Optimizer> makeOptimizer(const OptimizerOptions& options, std::size_t parameters) {
  switch (options.kind) {
    case OptimizerKind::kSgd:
      break;
    case OptimizerKind::kAdam:
      return std::make_unique<Adam>(options, parameters, false);
    case OptimizerKind::kAdamW:
      return std::make_unique<Adam>(options, parameters, true);
  }
  return std::make_unique<Sgd>(options, parameters);
}

}  // namespace ringtrain
