// Reading a byte range of an open file, all of it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace ringtrain::base {

// Reads `count` bytes at `offset` of the open file `fd` into `into` with pread (retrying short
// reads and EINTR). nullopt when all were read; else the problem, for the caller to put after the
// file's name: "read error: <errno text>", or "truncated while being read (the file shrank)" when
// the file ends before them.
std::optional<std::string> readExactly(int fd, void* into, std::size_t count, std::uint64_t offset);

}  // namespace ringtrain::base
