// Seeded weight initialisation: He for layers followed by a ReLU, Xavier (Glorot) otherwise.
#pragma once

#include <cmath>
#include <cstdint>
#include <span>
#include <string_view>

#include "models/tensor.h"

namespace ringtrain::models {

enum class Initialization {
  // Uniform in ±sqrt(6 / fanIn): variance 2 / fanIn, which keeps the activations' scale through
  // a stack of ReLUs (He et al. 2015; PyTorch's kaiming_uniform_ with ReLU gain).
  kHe,
  // Uniform in ±sqrt(6 / (fanIn + fanOut)): variance 2 / (fanIn + fanOut), for layers that feed
  // a loss or a linear output (Glorot & Bengio 2010).
  kXavier,
};

std::string_view toString(Initialization init);

// SplitMix64 (Steele, Lea & Flood 2014): a small generator whose sequence is defined by this
// code alone. std::mt19937 would do, but the standard distributions on top of it differ between
// standard libraries; here every build draws the same weights for the same seed.
class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t seed) : state_(seed) {}

  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

  // Uniform in [-bound, bound), from the top 53 bits (every double in [0,1) on a 2^-53 grid).
  double symmetric(double bound) {
    const double unit = static_cast<double>(next() >> 11) * 0x1.0p-53;
    return (2 * unit - 1) * bound;
  }
  // Standard normal, by the Box–Muller transform of two uniform draws.
  double normal() {
    const double u1 = (static_cast<double>(next() >> 11) + 1) * 0x1.0p-53;  // in (0, 1]
    const double u2 = static_cast<double>(next() >> 11) * 0x1.0p-53;
    return std::sqrt(-2 * std::log(u1)) * std::cos(2 * 3.141592653589793 * u2);
  }

 private:
  std::uint64_t state_;
};

// The generator for one layer: derived from the model's seed and the layer's index, so that a
// layer's weights depend on its own position only, not on how many values the layers before
// it drew.
SplitMix64 layerGenerator(std::uint64_t seed, int layerIndex);

// The bound of the uniform distribution for `init`.
double initializationBound(Initialization init, Index fanIn, Index fanOut);

template <class Scalar>
void fillUniform(std::span<Scalar> values, double bound, SplitMix64& generator) {
  for (Scalar& v : values)
    v = static_cast<Scalar>(generator.symmetric(bound));
}

template <class Scalar>
void fillNormal(std::span<Scalar> values, double stddev, SplitMix64& generator) {
  for (Scalar& v : values)
    v = static_cast<Scalar>(stddev * generator.normal());
}

}  // namespace ringtrain::models
