// A 64-bit fingerprint of a buffer, to check cheaply that ranks hold the same bytes.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ringtrain {

// FNV-1a over 8-byte words (then the tail bytes), with an extra shift-xor per word so that
// every input bit reaches the high bits. Not cryptographic: for catching replicas that drifted.
std::uint64_t fingerprint(const void* data, std::size_t bytes);

}  // namespace ringtrain
