// Sizes in bytes as people write them, read one way by every program and the library:
// --fusion-threshold 64M, allreduce_perf -e 256MB, RINGTRAIN_FUSION_THRESHOLD=8MiB.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace ringtrain {

// Plain bytes, or a number (a fraction too: 1.5M) with K, M or G (either case; binary units),
// optionally followed by B or iB: "65536", "64K", "64KB", "64KiB", "1.5M", "1G". nullopt for
// anything else, a negative number, or 2^63 bytes and more.
std::optional<std::size_t> parseByteSize(const std::string& text);

// 8388608 -> "8M", 65536 -> "64K", 1000 -> "1000": the shortest text parseByteSize reads back.
std::string byteSizeText(std::size_t bytes);

}  // namespace ringtrain
