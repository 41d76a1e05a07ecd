// Byte pixels to the floats in [0, 1] that data/'s datasets deliver.
#pragma once

#include <array>
#include <cstdint>

namespace ringtrain::data {

// byte / 255 for every byte, so that 255 is exactly 1.0f and each value is the correctly rounded
// quotient (multiplying by 1/255.0f would be off by an ulp for some bytes).
inline const std::array<float, 256>& byteToUnit() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int b = 0; b < 256; ++b)
      t[b] = static_cast<float>(b) / 255.0f;
    return t;
  }();
  return table;
}

}  // namespace ringtrain::data
