// TokenDataset: a token file (token_file.h) cut into windows for next-token prediction.
//
// Sample i is the window of context + 1 tokens that starts at token i * context: windows follow
// one another at stride `context`, sharing one token (the last target of one window is the first
// input of the next), as llm.c's loader steps through a file. A file of T tokens holds
// (T - 1) / context windows; the tokens after the last whole window are not trained on. Which
// windows a rank reads is the ShardedSampler's business: a window is one sample.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace ringtrain::data {

// One sample of a token dataset from its window of context + 1 ids: the first `context` ids as
// float inputs (exact below 2^24) and the last `context` as labels, the next token at each
// position. What every token dataset's gather writes per sample.
template <class Id>
void splitWindow(std::span<const Id> window, float* inputs, std::int32_t* labels) {
  const std::size_t context = window.size() - 1;
  for (std::size_t t = 0; t < context; ++t) {
    inputs[t] = static_cast<float>(window[t]);
    labels[t] = static_cast<std::int32_t>(window[t + 1]);
  }
}

class TokenDataset final : public Dataset {
 public:
  // Reads and checks the file (readTokenFile), then throws DataError naming it when it holds
  // less than one window (context + 1 tokens). context >= 1 and vocabulary in
  // [1, kMaxTokenVocabulary], else std::invalid_argument.
  TokenDataset(const std::filesystem::path& path, std::int64_t context, int vocabulary);
  // The same over tokens in memory (tests, generated text); `source` names them in errors.
  TokenDataset(std::vector<std::uint16_t> tokens, std::int64_t context, int vocabulary,
               std::string source);

  // (tokens - 1) / context.
  std::int64_t size() const override { return windows_; }
  // 1 x context x 1: one row of `context` token ids.
  SampleShape sampleShape() const override { return SampleShape{1, context_, 1}; }
  int numClasses() const override { return vocabulary_; }
  std::int64_t labelsPerSample() const override { return context_; }
  // Window i's first `context` tokens as floats into `images`, its tokens 1..context into
  // `labels`: the label at position t is the token that follows input t.
  void gather(std::span<const std::int64_t> indices, float* images,
              std::int32_t* labels) const override;
  std::string describe() const override;

  std::int64_t tokenCount() const { return static_cast<std::int64_t>(tokens_.size()); }

 private:
  std::string source_;
  std::int64_t context_ = 0;
  int vocabulary_ = 0;
  std::vector<std::uint16_t> tokens_;
  std::int64_t windows_ = 0;
};

}  // namespace ringtrain::data
