// Seeded randomness with results fixed by this code alone.
//
// std::shuffle, std::uniform_int_distribution and friends are implementation-defined: libstdc++
// and libc++ give different permutations for the same std::mt19937 seed. Every rank must draw the
// same permutation, possibly on machines built with different standard libraries, and a saved
// position must mean the same batches after a rebuild; hence these few lines of our own.
#pragma once

#include <cstdint>
#include <numeric>
#include <utility>
#include <vector>

namespace ringtrain::data {

// SplitMix64's output function (Steele, Lea and Flood, 2014): a bijection of 64-bit words that
// mixes every input bit into every output bit.
constexpr std::uint64_t mix64(std::uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// A keyed hash of words. For a fixed key it is a bijection of `value`, so distinct sample indices
// (or epochs) never share a stream. The key is mixed once, when the object is made, which keeps
// per-pixel hashing to one mix64.
class KeyedHash {
 public:
  explicit constexpr KeyedHash(std::uint64_t key) : mixedKey_(mix64(key)) {}
  constexpr std::uint64_t operator()(std::uint64_t value) const {
    return mix64(mixedKey_ ^ (value + 0x9e3779b97f4a7c15ULL));
  }

 private:
  std::uint64_t mixedKey_;
};

constexpr std::uint64_t hash64(std::uint64_t key, std::uint64_t value) {
  return KeyedHash(key)(value);
}

// A float in [0, 1) from the top 24 bits of a word: exactly representable, never 1.
constexpr float unitFloat(std::uint64_t bits) {
  return static_cast<float>(bits >> 40) * (1.0f / 16777216.0f);
}

// SplitMix64: a 64-bit state advanced by a constant and mixed. Small, fast, and good enough for
// shuffling and noise (it passes BigCrush); not for cryptography.
class SplitMix64 {
 public:
  explicit constexpr SplitMix64(std::uint64_t seed) : state_(seed) {}

  constexpr std::uint64_t next() {
    state_ += 0x9e3779b97f4a7c15ULL;
    return mix64(state_);
  }

  // Uniform in [0, n) for n > 0, without the bias of a plain `next() % n`: words below
  // 2^64 mod n are redrawn, so every residue has the same number of words left.
  constexpr std::uint64_t below(std::uint64_t n) {
    const std::uint64_t threshold = (0 - n) % n;
    for (;;) {
      const std::uint64_t r = next();
      if (r >= threshold) return r % n;
    }
  }

 private:
  std::uint64_t state_;
};

// A uniformly random permutation of [0, n) (Fisher-Yates, drawing from `rng`).
inline std::vector<std::int64_t> shuffledIndices(std::int64_t n, SplitMix64& rng) {
  std::vector<std::int64_t> indices(static_cast<std::size_t>(n));
  std::iota(indices.begin(), indices.end(), std::int64_t{0});
  for (std::size_t i = indices.size(); i > 1; --i) {
    std::swap(indices[i - 1], indices[static_cast<std::size_t>(rng.below(i))]);
  }
  return indices;
}

}  // namespace ringtrain::data
