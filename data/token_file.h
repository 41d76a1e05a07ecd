// Token files in llm.c's format, so that files made for llm.c train here unchanged.
//
// A header of 256 little-endian int32: [0] the magic 20240520, [1] the version (1: uint16 token
// ids, GPT-2's vocabulary; llm.c's version 2 holds uint32 ids and is not read here), [2] the
// number of tokens, the rest zero. Then exactly that many little-endian uint16 token ids.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace ringtrain::data {

inline constexpr std::int32_t kTokenFileMagic = 20240520;
inline constexpr std::int32_t kTokenFileVersion = 1;
inline constexpr std::size_t kTokenFileHeaderInts = 256;
inline constexpr std::size_t kTokenFileHeaderBytes = kTokenFileHeaderInts * 4;
// uint16 ids: a vocabulary of at most 65536 tokens (GPT-2's has 50257).
inline constexpr int kMaxTokenVocabulary = 65536;

// The bytes of a token file holding `tokens`; more than INT32_MAX tokens (the header's count is
// an int32) is std::invalid_argument.
std::vector<std::uint8_t> encodeTokenFile(std::span<const std::uint16_t> tokens);

// Encodes and writes `tokens` durably: a temporary file beside `path`, fsynced, renamed over
// `path` and the folder fsynced (durable_io.h). Errors throw DataError naming the file.
void writeTokenFile(const std::filesystem::path& path, std::span<const std::uint16_t> tokens);

// Reads a whole token file and checks it: magic, version, a length of exactly header + count
// tokens, every id below `vocabulary` (in [1, kMaxTokenVocabulary]). Each problem throws
// DataError, one line naming the file: "wrong magic", "unsupported version", "truncated",
// "trailing bytes", "token 70000 at position 12 is outside the vocabulary of 50257".
std::vector<std::uint16_t> readTokenFile(const std::filesystem::path& path, int vocabulary);
// The same checks on a token file's bytes; `name` stands for the file in errors.
std::vector<std::uint16_t> decodeTokenFile(std::span<const std::uint8_t> bytes, int vocabulary,
                                           const std::string& name);

// What a model that learned only the tokens' frequencies would score: the entropy of the
// empirical unigram distribution, -sum p(t) ln p(t) over the distinct ids t (0 for no tokens).
struct TokenStatistics {
  std::int64_t count = 0;
  std::int64_t distinct = 0;
  double unigramEntropyNats = 0.0;
};
TokenStatistics tokenStatistics(std::span<const std::uint16_t> tokens);

// Throws DataError ("<source>: token <id> at position <i> is outside the vocabulary of <n>") at
// the first id >= vocabulary.
void checkTokenIds(std::span<const std::uint16_t> tokens, int vocabulary,
                   const std::string& source);

}  // namespace ringtrain::data
