// The entry point libFuzzer calls with each input; replay_main.cc calls it too.
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);
