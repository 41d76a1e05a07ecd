// BpeTokenizer: GPT-2's byte-level byte-pair encoding, from the vocabulary and merges GPT-2
// published (encoder.json and vocab.bpe; data/fetch_gpt2_vocab.sh fetches them into data/gpt2).
//
// How text becomes token ids, as GPT-2's encoder.py does it:
//   1. Pre-tokenisation: GPT-2's pattern cuts the text into words,
//        's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//      (PCRE2 in UTF mode with Unicode classes: std::regex has neither \p{..} nor UTF-8).
//   2. Each word's UTF-8 bytes become one symbol each. encoder.json spells a byte as one printable
//      character (GPT-2's byte-to-unicode table: the printable Latin-1 bytes stand for themselves,
//      the other 68 for U+0100 upwards, e.g. the space is "Ġ", the newline "Ċ").
//   3. The adjacent pair with the lowest rank in vocab.bpe (its line order) is merged, every
//      occurrence left to right, until no adjacent pair has a rank; the symbols are the tokens.
// Decoding concatenates the tokens' bytes. Tokens that are neither a byte nor a merge result are
// special (GPT-2 has one: <|endoftext|> = 50256); encode reads their text literally unless told
// to recognise it.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace ringtrain::data {

// What encode does with the text of a special token ("<|endoftext|>") found in its input.
enum class SpecialTokens {
  kAsText,      // encodes it like any other text (GPT-2's encoder.py; safe for untrusted text)
  kRecognised,  // emits the special token's id (tiktoken's allowed_special="all")
};

class BpeTokenizer {
 public:
  // Reads folder/encoder.json and folder/vocab.bpe.
  static BpeTokenizer loadFolder(const std::filesystem::path& folder);
  static BpeTokenizer load(const std::filesystem::path& encoderJson,
                           const std::filesystem::path& vocabBpe);
  // From the two files' contents; the names stand for the files in errors. Throws DataError, one
  // line naming the file: encoder.json not a JSON object of string -> integer id, ids not
  // distinct or outside [0, entries), a token spelled outside the byte alphabet, a byte without
  // its token; vocab.bpe without its "#version" first line, a line that is not two tokens
  // separated by one space, a repeated merge, a merge of or into a token not in encoder.json.
  BpeTokenizer(std::string_view encoderJson, std::string_view vocabBpe,
               const std::string& encoderName, const std::string& mergesName);
  ~BpeTokenizer();
  BpeTokenizer(BpeTokenizer&&) noexcept;
  BpeTokenizer& operator=(BpeTokenizer&&) noexcept;

  // Entries of encoder.json (GPT-2: 50257).
  int vocabularySize() const { return static_cast<int>(bytesOf_.size()); }
  int mergeCount() const { return static_cast<int>(merges_.size()); }
  // The id of a token as encoder.json spells it ("<|endoftext|>", "Ġthe"), if there is one.
  std::optional<std::int32_t> tokenId(std::string_view spelling) const;

  // The ids of `text`, which must be UTF-8: invalid UTF-8 throws DataError naming the byte
  // offset ("text is not valid UTF-8 at byte 17: ..."), for the caller to prefix with its file.
  std::vector<std::int32_t> encode(std::string_view text,
                                   SpecialTokens special = SpecialTokens::kAsText) const;
  // The bytes of the tokens, one after the other (a cut inside a character gives partial UTF-8).
  // An id outside [0, vocabularySize()) throws DataError.
  std::string decode(std::span<const std::int32_t> ids) const;

 private:
  class Pattern;  // the compiled pre-tokenisation pattern (keeps pcre2.h out of this header)
  struct Merge {
    std::int32_t rank = 0;
    std::int32_t result = 0;
  };
  using WordCache = std::unordered_map<std::string, std::vector<std::int32_t>>;

  void readVocabulary(std::string_view json, const std::string& name);
  void findByteTokens(const std::string& name);
  void readMerges(std::string_view text, const std::string& name);
  void addMerge(std::string_view line, std::int32_t rank, const std::string& name);
  void findSpecialTokens();
  // Where the earliest special token's text starts from `at` on, and its id (the longest where two
  // start there); npos when there is none.
  std::pair<std::size_t, std::int32_t> nextSpecial(std::string_view text, std::size_t at) const;
  void encodeOrdinary(std::string_view text, std::size_t offset, WordCache& cache,
                      std::vector<std::int32_t>& out) const;
  void encodeWord(std::string_view word, WordCache& cache, std::vector<std::int32_t>& out) const;
  std::vector<std::int32_t> mergeWord(std::string_view word) const;

  std::unique_ptr<Pattern> pattern_;
  std::unordered_map<std::string, std::int32_t> ids_;  // encoder.json: spelling -> id
  std::vector<std::string> bytesOf_;                    // id -> the bytes it stands for
  std::array<std::int32_t, 256> byteToken_{};           // byte -> its one-byte token
  std::unordered_map<std::uint64_t, Merge> merges_;     // (left id, right id) -> rank, result
  std::vector<std::int32_t> specials_;                  // ids of the special tokens
};

}  // namespace ringtrain::data
