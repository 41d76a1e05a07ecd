#include "data/token_file.h"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <stdexcept>
#include <string>
#include <system_error>

#include "data/data_error.h"
#include "formats/durable_io.h"
#include "formats/file_bytes.h"

namespace ringtrain::data {
namespace {

[[noreturn]] void fail(const std::string& name, const std::string& what) {
  throw DataError(name + ": " + what);
}

std::int32_t int32At(std::span<const std::uint8_t> bytes, std::size_t index) {
  const std::size_t at = index * 4;
  const std::uint32_t value = std::uint32_t{bytes[at]} | std::uint32_t{bytes[at + 1]} << 8 |
                              std::uint32_t{bytes[at + 2]} << 16 |
                              std::uint32_t{bytes[at + 3]} << 24;
  return static_cast<std::int32_t>(value);
}

void appendLittleEndian(std::vector<std::uint8_t>& out, std::uint32_t value, int bytes) {
  for (int k = 0; k < bytes; ++k)
    out.push_back(static_cast<std::uint8_t>(value >> (8 * k)));
}

// The header's token count, once magic and version are right.
std::int64_t checkHeader(const std::string& name, std::span<const std::uint8_t> header) {
  if (header.size() >= 4 && int32At(header, 0) != kTokenFileMagic) {
    fail(name, "wrong magic " + std::to_string(int32At(header, 0)) + ", expected " +
                   std::to_string(kTokenFileMagic) + " (not a token file in llm.c's format)");
  }
  if (header.size() < kTokenFileHeaderBytes) {
    fail(name, "truncated: " + std::to_string(header.size()) + " bytes, shorter than the " +
                   std::to_string(kTokenFileHeaderBytes) + "-byte header");
  }
  const std::int32_t version = int32At(header, 1);
  if (version != kTokenFileVersion) {
    fail(name, "unsupported version " + std::to_string(version) + " (only version " +
                   std::to_string(kTokenFileVersion) + ", uint16 GPT-2 token ids, is read)");
  }
  const std::int32_t count = int32At(header, 2);
  if (count < 0) fail(name, "negative token count " + std::to_string(count) + " in the header");
  return count;
}

void checkLength(const std::string& name, std::int64_t count, std::size_t got) {
  const std::size_t expected = kTokenFileHeaderBytes + 2 * static_cast<std::size_t>(count);
  if (got < expected) {
    fail(name, "truncated: the header counts " + std::to_string(count) + " tokens (" +
                   std::to_string(expected) + " bytes with the header) but the file has " +
                   std::to_string(got) + " bytes");
  }
  if (got > expected) {
    fail(name, "trailing bytes after the " + std::to_string(count) +
                   " tokens the header counts (expected " + std::to_string(expected) +
                   " bytes in all)");
  }
}

}  // namespace

std::vector<std::uint8_t> encodeTokenFile(std::span<const std::uint16_t> tokens) {
  if (tokens.size() > static_cast<std::size_t>(INT32_MAX)) {
    throw std::invalid_argument("encodeTokenFile: " + std::to_string(tokens.size()) +
                                " tokens do not fit the header's int32 count");
  }
  std::vector<std::uint8_t> out;
  out.reserve(kTokenFileHeaderBytes + 2 * tokens.size());
  appendLittleEndian(out, static_cast<std::uint32_t>(kTokenFileMagic), 4);
  appendLittleEndian(out, static_cast<std::uint32_t>(kTokenFileVersion), 4);
  appendLittleEndian(out, static_cast<std::uint32_t>(tokens.size()), 4);
  out.resize(kTokenFileHeaderBytes, 0);
  for (const std::uint16_t token : tokens)
    appendLittleEndian(out, token, 2);
  return out;
}

void writeTokenFile(const std::filesystem::path& path, std::span<const std::uint16_t> tokens) {
  const std::vector<std::uint8_t> bytes = encodeTokenFile(tokens);
  // The process id keeps two writers of the same file from sharing a temporary name.
  const std::filesystem::path temporary =
      path.string() + ".partial-" + std::to_string(static_cast<long>(getpid()));
  try {
    formats::writeNewFileDurably(temporary, bytes);
    formats::renameDurably(temporary, path);
  } catch (...) {
    std::error_code ignored;
    std::filesystem::remove(temporary, ignored);
    throw;
  }
}

namespace {

void checkVocabulary(int vocabulary) {
  if (vocabulary < 1 || vocabulary > kMaxTokenVocabulary) {
    throw std::invalid_argument("token files: vocabulary " + std::to_string(vocabulary) +
                                " outside [1, " + std::to_string(kMaxTokenVocabulary) + "]");
  }
}

}  // namespace

std::vector<std::uint16_t> readTokenFile(const std::filesystem::path& path, int vocabulary) {
  checkVocabulary(vocabulary);
  formats::FileContent content(path);
  const std::int64_t count = checkHeader(path.string(), content.readUpTo(kTokenFileHeaderBytes));
  // One byte more than the header's length: trailing bytes show, and no more is read (or inflated).
  const std::size_t expected = kTokenFileHeaderBytes + 2 * static_cast<std::size_t>(count);
  return decodeTokenFile(content.readUpTo(expected + 1), vocabulary, path.string());
}

std::vector<std::uint16_t> decodeTokenFile(std::span<const std::uint8_t> bytes, int vocabulary,
                                           const std::string& name) {
  checkVocabulary(vocabulary);
  const std::int64_t count =
      checkHeader(name, bytes.first(std::min(bytes.size(), kTokenFileHeaderBytes)));
  checkLength(name, count, bytes.size());
  std::vector<std::uint16_t> tokens(static_cast<std::size_t>(count));
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const std::size_t at = kTokenFileHeaderBytes + 2 * i;
    tokens[i] = static_cast<std::uint16_t>(bytes[at] | bytes[at + 1] << 8);
  }
  checkTokenIds(tokens, vocabulary, name);
  return tokens;
}

TokenStatistics tokenStatistics(std::span<const std::uint16_t> tokens) {
  std::vector<std::int64_t> counts(std::size_t{1} << 16, 0);
  for (const std::uint16_t token : tokens)
    ++counts[token];
  TokenStatistics statistics;
  statistics.count = static_cast<std::int64_t>(tokens.size());
  for (const std::int64_t n : counts) {
    if (n == 0) continue;
    ++statistics.distinct;
    const double p = static_cast<double>(n) / static_cast<double>(statistics.count);
    statistics.unigramEntropyNats -= p * std::log(p);
  }
  return statistics;
}

void checkTokenIds(std::span<const std::uint16_t> tokens, int vocabulary,
                   const std::string& source) {
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] >= vocabulary) {
      throw DataError(source + ": token " + std::to_string(tokens[i]) + " at position " +
                      std::to_string(i) + " is outside the vocabulary of " +
                      std::to_string(vocabulary));
    }
  }
}

}  // namespace ringtrain::data
