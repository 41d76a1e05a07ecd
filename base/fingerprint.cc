#include "base/fingerprint.h"

#include <cstring>

namespace ringtrain {

std::uint64_t fingerprint(const void* data, std::size_t bytes) {
  constexpr std::uint64_t kPrime = 0x100000001b3ull;
  std::uint64_t h = 0xcbf29ce484222325ull;
  const auto* p = static_cast<const unsigned char*>(data);
  std::size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    std::uint64_t word;
    std::memcpy(&word, p + i, 8);
    h = (h ^ word) * kPrime;
    h ^= h >> 29;
  }
  for (; i < bytes; ++i)
    h = (h ^ p[i]) * kPrime;
  return h;
}

}  // namespace ringtrain
