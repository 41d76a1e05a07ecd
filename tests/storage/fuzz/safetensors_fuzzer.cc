// libFuzzer target: the safetensors reader (storage/safetensors.h) on arbitrary bytes, the
// weights file `ringtrain train --init-from` takes from outside. Any answer but a FormatError
// (CheckpointError is one) is a finding.
#include <cstdint>
#include <span>

#include "formats/format_error.h"
#include "storage/safetensors.h"
#include "tests/storage/fuzz/fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    ringtrain::storage::parseSafetensors(std::span(data, size), "input.safetensors");
  } catch (const ringtrain::formats::FormatError&) {
  }
  return 0;
}
