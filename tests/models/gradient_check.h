// Finite-difference gradient checks for models/ tests, in float64.
//
// The numeric gradient is the central difference (f(v + h) − f(v − h)) / 2h with h = 1e-5:
// its truncation error is O(h²) ≈ 1e-10 relative and its rounding error about
// 1e-16·|f| / h ≈ 1e-11·|f|. An analytic gradient a passes against the numeric n when, for every
// element, |a − n| / max(|a| + |n|, 1e-2) < 1e-6: relative where gradients are of useful size,
// absolute (1e-8) near zero, where the difference is rounding noise. A wrong formula (a
// transposed index, a missing factor of 2 or 1/B) gives errors of 1e-2 and more.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "models/layer.h"

namespace ringtrain::models::test_support {

inline constexpr double kFiniteDifferenceStep = 1e-5;
inline constexpr double kGradientTolerance = 1e-6;

// n values uniform in [low, high), from a seeded generator.
std::vector<double> uniformValues(std::size_t n, double low, double high, std::uint64_t seed);

struct GradientError {
  double worst = 0;  // the largest relative error
  std::size_t index = 0;
  double analytic = 0;
  double numeric = 0;

  std::string describe() const;
};

// Compares analytic[i] with numeric[i] for every i in `indices` (all of them when empty).
GradientError compareGradients(std::span<const double> analytic, std::span<const double> numeric,
                               std::span<const std::size_t> indices = {});

// Central differences of f with respect to values[i], for every i in `indices` (all when empty);
// the other entries of the result are zero. values is restored afterwards.
std::vector<double> numericGradient(std::span<double> values, const std::function<double()>& f,
                                    std::span<const std::size_t> indices = {});

// A layer run on its own, with its own parameter, gradient and batch buffers. The scalar it
// checks is f = Σ r ⊙ forward(x) for a fixed random r, so that ∂f/∂y = r is what backward is fed.
class LayerHarness {
 public:
  // Parameters and inputs uniform in [-1, 1). A tied layer (Layer::tiedParameter) gets a tensor
  // of the tied shape as its parameters.
  LayerHarness(Layer<double>& layer, Index batch, std::uint64_t seed);

  std::vector<double>& input() { return input_; }
  std::vector<double>& parameters() { return parameters_; }
  const std::vector<double>& output() const { return output_; }

  double projectedOutput();
  // Runs forward, backwardParameters and backwardInput; returns {∂f/∂parameters, ∂f/∂x}.
  std::pair<std::vector<double>, std::vector<double>> analyticGradients();
  // The worst of the parameter and input gradient errors.
  GradientError check();
  // The parameter gradients' error alone, for a layer whose input has no gradient (token ids).
  GradientError checkParameters();

 private:
  Layer<double>& layer_;
  Index batch_;
  std::vector<double> parameters_, gradients_, input_, output_, projection_;
};

}  // namespace ringtrain::models::test_support
