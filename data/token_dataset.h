// TokenDataset: a token file (token_file.h) cut into windows for next-token prediction.
//
// Sample i is the window of context + 1 tokens that starts at token i * context: windows follow
// one another at stride `context`, sharing one token (the last target of one window is the first
// input of the next), as llm.c's loader steps through a file. A file of T tokens holds
// (T - 1) / context windows; the tokens after the last whole window are not trained on. Which
// windows a rank reads is the ShardedSampler's business: a window is one sample.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace ringtrain::data {

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
