#include "models/initialization.h"

#include <cmath>

namespace ringtrain::models {

std::string_view toString(Initialization init) {
  return init == Initialization::kHe ? "he" : "xavier";
}

SplitMix64 layerGenerator(std::uint64_t seed, int layerIndex) {
  // One SplitMix64 step scrambles the seed, so seeds 1 and 2 do not give overlapping streams
  // shifted by one layer.
  SplitMix64 mixer(seed);
  return SplitMix64(mixer.next() ^
                    (0x9e3779b97f4a7c15ULL * static_cast<std::uint64_t>(layerIndex + 1)));
}

double initializationBound(Initialization init, Index fanIn, Index fanOut) {
  const double denominator = init == Initialization::kHe ? static_cast<double>(fanIn)
                                                         : static_cast<double>(fanIn + fanOut);
  return std::sqrt(6.0 / denominator);
}

}  // namespace ringtrain::models
