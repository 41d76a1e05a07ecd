#include "data/token_dataset.h"

#include <stdexcept>
#include <utility>

#include "data/data_error.h"
#include "data/token_file.h"

namespace ringtrain::data {
namespace {

void checkShape(std::int64_t context, int vocabulary) {
  if (context < 1 || vocabulary < 1 || vocabulary > kMaxTokenVocabulary) {
    throw std::invalid_argument("TokenDataset: context " + std::to_string(context) +
                                " and vocabulary " + std::to_string(vocabulary) +
                                " must be at least 1 (the vocabulary at most " +
                                std::to_string(kMaxTokenVocabulary) + ")");
  }
}

// Checks the arguments before the file is read: a bad context is the caller's bug, not the file's.
int checkedVocabulary(std::int64_t context, int vocabulary) {
  checkShape(context, vocabulary);
  return vocabulary;
}

}  // namespace

TokenDataset::TokenDataset(const std::filesystem::path& path, std::int64_t context,
                           int vocabulary)
    : TokenDataset(readTokenFile(path, checkedVocabulary(context, vocabulary)), context,
                   vocabulary, path.string()) {}

TokenDataset::TokenDataset(std::vector<std::uint16_t> tokens, std::int64_t context,
                           int vocabulary, std::string source)
    : source_(std::move(source)),
      context_(context),
      vocabulary_(vocabulary),
      tokens_(std::move(tokens)) {
  checkShape(context, vocabulary);
  checkTokenIds(tokens_, vocabulary, source_);
  if (tokenCount() < context + 1) {
    throw DataError(source_ + ": " + std::to_string(tokenCount()) +
                    " tokens, shorter than one window of context " + std::to_string(context) +
                    " + 1 tokens");
  }
  windows_ = (tokenCount() - 1) / context;
}

void TokenDataset::gather(std::span<const std::int64_t> indices, float* images,
                          std::int32_t* labels) const {
  const auto context = static_cast<std::size_t>(context_);
  for (std::size_t j = 0; j < indices.size(); ++j) {
    const std::int64_t i = indices[j];
    if (i < 0 || i >= windows_) {
      throw std::out_of_range("TokenDataset::gather: index " + std::to_string(i) +
                              " outside [0, " + std::to_string(windows_) + ")");
    }
    const std::span<const std::uint16_t> window(
        tokens_.data() + static_cast<std::size_t>(i) * context, context + 1);
    splitWindow(window, images + j * context, labels + j * context);
  }
}

std::string TokenDataset::describe() const {
  return "tokens " + source_ + ": " + std::to_string(tokenCount()) + " tokens, " +
         std::to_string(windows_) + " windows of " + std::to_string(context_) +
         " + 1, vocabulary " + std::to_string(vocabulary_);
}

}  // namespace ringtrain::data
