// libFuzzer target: token files in llm.c's format (data/token_file.h) on arbitrary bytes, and the
// windows of a TokenDataset over what they hold. The bytes are decoded in memory
// (decodeTokenFile: the checks readTokenFile makes after reading, which the IDX target already
// fuzzes for plain and .gz files). Any answer but a FormatError (DataError is one) is a finding.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <span>
#include <vector>

#include "data/token_dataset.h"
#include "data/token_file.h"
#include "formats/format_error.h"
#include "tests/storage/fuzz/fuzz_target.h"

namespace {

constexpr int kVocabulary = 50257;

// Gathers every window, for a context taken from the input (1 to 16 tokens).
void gatherEveryWindow(std::vector<std::uint16_t> tokens, std::int64_t context) {
  const ringtrain::data::TokenDataset dataset(std::move(tokens), context, kVocabulary, "input");
  std::vector<std::int64_t> indices(static_cast<std::size_t>(dataset.size()));
  std::iota(indices.begin(), indices.end(), std::int64_t{0});
  std::vector<float> inputs(indices.size() * static_cast<std::size_t>(context));
  std::vector<std::int32_t> labels(inputs.size());
  dataset.gather(indices, inputs.data(), labels.data());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    auto tokens = ringtrain::data::decodeTokenFile(std::span(data, size), kVocabulary, "input");
    const std::int64_t context = size > 12 ? 1 + data[12] % 16 : 1;  // a byte of the count field
    gatherEveryWindow(std::move(tokens), context);
  } catch (const ringtrain::formats::FormatError&) {
  }
  return 0;
}
