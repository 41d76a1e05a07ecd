#include "data/bpe_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <utility>

#include "data/data_error.h"
#include "formats/file_bytes.h"

namespace ringtrain::data {
namespace {

// GPT-2's pre-tokenisation pattern (encoder.py), unchanged.
constexpr char kPretokenPattern[] =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
// The byte alphabet's code points lie below this: 256 + the 68 bytes that are not printable.
constexpr char32_t kAlphabetEnd = 256 + 68;

[[noreturn]] void fail(const std::string& name, const std::string& what) {
  throw DataError(name + ": " + what);
}

// GPT-2's bytes_to_unicode: the printable Latin-1 bytes ('!'..'~', U+00A1..U+00AC,
// U+00AE..U+00FF) stand for themselves, the others for U+0100, U+0101, ... in byte order.
const std::array<char32_t, 256>& byteToCodePoint() {
  static const std::array<char32_t, 256> table = [] {
    std::array<char32_t, 256> t{};
    char32_t next = 256;
    for (char32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      t[b] = printable ? b : next++;
    }
    return t;
  }();
  return table;
}

// The inverse: code point -> byte, -1 where a code point stands for no byte.
const std::array<int, kAlphabetEnd>& codePointToByte() {
  static const std::array<int, kAlphabetEnd> table = [] {
    std::array<int, kAlphabetEnd> t{};
    t.fill(-1);
    for (int b = 0; b < 256; ++b)
      t[byteToCodePoint()[static_cast<std::size_t>(b)]] = b;
    return t;
  }();
  return table;
}

std::string utf8(char32_t c) {
  std::string out;
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
  return out;
}

// The next code point of UTF-8 text at `at` (moved past it); one byte >= 0x80 reads as itself
// when the sequence is malformed, which the alphabet check then rejects.
char32_t nextCodePoint(std::string_view s, std::size_t& at) {
  const auto lead = static_cast<unsigned char>(s[at++]);
  const int more = lead >= 0xF0 ? 3 : lead >= 0xE0 ? 2 : lead >= 0xC0 ? 1 : 0;
  if (more == 0 || at + static_cast<std::size_t>(more) > s.size()) return lead;
  char32_t c = lead & (0x3F >> more);
  for (int k = 0; k < more; ++k)
    c = (c << 6) | (static_cast<unsigned char>(s[at++]) & 0x3F);
  return c;
}

// A token's text for an error message: quoted, cut after 40 bytes at a character boundary.
std::string shown(std::string_view s) {
  if (s.size() <= 40) return "\"" + std::string(s) + "\"";
  std::size_t cut = 40;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80)
    --cut;
  return "\"" + std::string(s.substr(0, cut)) + "...\"";
}

// The bytes a token stands for, from its spelling in GPT-2's byte alphabet.
std::string spellingToBytes(std::string_view spelling, std::int64_t id, const std::string& name) {
  std::string bytes;
  for (std::size_t at = 0; at < spelling.size();) {
    const char32_t c = nextCodePoint(spelling, at);
    const int byte = c < kAlphabetEnd ? codePointToByte()[c] : -1;
    if (byte < 0) {
      fail(name, "token " + shown(spelling) + " (id " + std::to_string(id) +
                     ") has a character outside GPT-2's byte alphabet (code point " +
                     std::to_string(static_cast<std::uint32_t>(c)) + ")");
    }
    bytes += static_cast<char>(byte);
  }
  if (bytes.empty()) fail(name, "the empty string is not a token (id " + std::to_string(id) + ")");
  return bytes;
}

std::int64_t integerId(const nlohmann::json& value, const std::string& spelling,
                       std::size_t entries, const std::string& name) {
  if (!value.is_number_integer()) {
    fail(name, "the value of " + shown(spelling) + " is " + value.dump() +
                   ", not an integer id (not GPT-2's encoder.json: token -> id)");
  }
  const bool inRange = value.is_number_unsigned() && value.get<std::uint64_t>() < entries;
  if (!inRange) {
    fail(name, "the id " + value.dump() + " of " + shown(spelling) + " is outside [0, " +
                   std::to_string(entries) + ")");
  }
  return value.get<std::int64_t>();
}

std::string readText(const std::filesystem::path& path) {
  formats::FileContent content(path);
  const auto bytes = content.readUpTo(content.maxContentBytes());
  return std::string(bytes.begin(), bytes.end());
}

// The lines of `text` without their '\n' (and '\r'), trailing empty lines dropped.
std::vector<std::string_view> linesOf(std::string_view text) {
  std::vector<std::string_view> lines;
  for (std::size_t at = 0; at < text.size();) {
    std::size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(at, end - at);
    if (line.ends_with('\r')) line.remove_suffix(1);
    lines.push_back(line);
    at = end + 1;
  }
  while (!lines.empty() && lines.back().empty())
    lines.pop_back();
  return lines;
}

std::uint64_t pairKey(std::int32_t left, std::int32_t right) {
  return static_cast<std::uint64_t>(static_cast<std::uint32_t>(left)) << 32 |
         static_cast<std::uint32_t>(right);
}

struct MatchDataFree {
  void operator()(pcre2_match_data* data) const { pcre2_match_data_free(data); }
};

std::string pcre2Message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof buffer);
  return reinterpret_cast<const char*>(buffer);
}

}  // namespace

// GPT-2's pattern compiled once (and JIT-compiled when the library can), shared read-only by
// every encode call; each call brings its own match data.
class BpeTokenizer::Pattern {
 public:
  Pattern() {
    int error = 0;
    PCRE2_SIZE offset = 0;
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(kPretokenPattern), PCRE2_ZERO_TERMINATED,
                          PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
    if (!code_) throw std::logic_error("GPT-2's pattern does not compile: " + pcre2Message(error));
    pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE);  // optional: the interpreter is the fallback
  }
  ~Pattern() { pcre2_code_free(code_); }
  Pattern(const Pattern&) = delete;
  Pattern& operator=(const Pattern&) = delete;

  // Calls visit(word) for the words of `text`, in order; together they are the whole text.
  // `offset` (where text starts in the caller's text) places the byte an error names.
  template <class Visit>
  void forEachWord(std::string_view text, std::size_t offset, Visit visit) const {
    std::unique_ptr<pcre2_match_data, MatchDataFree> data(
        pcre2_match_data_create_from_pattern(code_, nullptr));
    if (!data) throw std::bad_alloc();
    const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    std::uint32_t options = 0;  // the first match checks the whole text is UTF-8, once
    for (std::size_t start = 0; start < text.size();) {
      const int rc = pcre2_match(code_, subject, text.size(), start, options, data.get(), nullptr);
      if (rc < 0) fail(rc, data.get(), offset);
      options = PCRE2_NO_UTF_CHECK;
      const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data.get());
      if (ovector[1] <= start) throw std::logic_error("GPT-2's pattern matched nothing");
      visit(text.substr(start, ovector[1] - start));  // the pattern leaves no gap
      start = ovector[1];
    }
  }

 private:
  [[noreturn]] static void fail(int rc, pcre2_match_data* data, std::size_t offset) {
    if (rc <= PCRE2_ERROR_UTF8_ERR1 && rc >= PCRE2_ERROR_UTF8_ERR21) {
      throw DataError("text is not valid UTF-8 at byte " +
                      std::to_string(offset + pcre2_get_startchar(data)) + " (" +
                      pcre2Message(rc) + ")");
    }
    throw DataError("pre-tokenisation failed near byte " + std::to_string(offset) + ": " +
                    pcre2Message(rc));
  }

  pcre2_code* code_ = nullptr;
};

BpeTokenizer BpeTokenizer::loadFolder(const std::filesystem::path& folder) {
  return load(folder / "encoder.json", folder / "vocab.bpe");
}

BpeTokenizer BpeTokenizer::load(const std::filesystem::path& encoderJson,
                                const std::filesystem::path& vocabBpe) {
  const std::string encoder = readText(encoderJson);  // first: a missing file is named in order
  const std::string merges = readText(vocabBpe);
  return BpeTokenizer(encoder, merges, encoderJson.string(), vocabBpe.string());
}

BpeTokenizer::BpeTokenizer(std::string_view encoderJson, std::string_view vocabBpe,
                           const std::string& encoderName, const std::string& mergesName)
    : pattern_(std::make_unique<Pattern>()) {
  readVocabulary(encoderJson, encoderName);
  readMerges(vocabBpe, mergesName);
  findSpecialTokens();
}

BpeTokenizer::~BpeTokenizer() = default;
BpeTokenizer::BpeTokenizer(BpeTokenizer&&) noexcept = default;
BpeTokenizer& BpeTokenizer::operator=(BpeTokenizer&&) noexcept = default;

void BpeTokenizer::readVocabulary(std::string_view json, const std::string& name) {
  nlohmann::json document;
  try {
    document = nlohmann::json::parse(json);
  } catch (const nlohmann::json::exception& e) {
    fail(name, std::string("not valid JSON (GPT-2's encoder.json is a JSON object): ") + e.what());
  }
  if (!document.is_object() || document.empty()) {
    fail(name, "not a JSON object of token -> id (GPT-2's encoder.json)");
  }
  const std::size_t entries = document.size();
  bytesOf_.assign(entries, {});
  for (const auto& [spelling, value] : document.items()) {
    const std::int64_t id = integerId(value, spelling, entries, name);
    auto& bytes = bytesOf_[static_cast<std::size_t>(id)];
    if (!bytes.empty()) fail(name, "the id " + std::to_string(id) + " is given twice");
    bytes = spellingToBytes(spelling, id, name);
    ids_.emplace(spelling, static_cast<std::int32_t>(id));
  }
  findByteTokens(name);
}

void BpeTokenizer::findByteTokens(const std::string& name) {
  for (std::size_t b = 0; b < 256; ++b) {
    const std::string spelling = utf8(byteToCodePoint()[b]);
    const auto found = ids_.find(spelling);
    if (found == ids_.end()) {
      fail(name, "has no token for the byte " + std::to_string(b) + " (" + shown(spelling) +
                     "): a byte-level BPE vocabulary has all 256");
    }
    byteToken_[b] = found->second;
  }
}

void BpeTokenizer::readMerges(std::string_view text, const std::string& name) {
  const std::vector<std::string_view> lines = linesOf(text);
  if (lines.empty() || !lines[0].starts_with("#version")) {
    fail(name, "the first line is not \"#version ...\" (not a BPE merges file like GPT-2's "
               "vocab.bpe)");
  }
  for (std::size_t k = 1; k < lines.size(); ++k)
    addMerge(lines[k], static_cast<std::int32_t>(k - 1), name);
}

// Line rank + 2 of the merges file (the #version line is line 1).
void BpeTokenizer::addMerge(std::string_view line, std::int32_t rank, const std::string& name) {
  const std::string where = "line " + std::to_string(rank + 2);
  const std::size_t space = line.find(' ');
  if (space == 0 || space == std::string_view::npos || space + 1 == line.size() ||
      line.find(' ', space + 1) != std::string_view::npos) {
    fail(name, where + " is not two tokens separated by one space: " + shown(line));
  }
  const std::string left(line.substr(0, space));
  const std::string right(line.substr(space + 1));
  // The id of `spelling`, or the error `what`.
  const auto idOf = [&](const std::string& spelling, const std::string& what) {
    const auto found = ids_.find(spelling);
    if (found == ids_.end()) fail(name, where + ": " + what);
    return found->second;
  };
  const std::int32_t leftId = idOf(left, shown(left) + " is not a token");
  const std::int32_t rightId = idOf(right, shown(right) + " is not a token");
  const Merge merge{rank, idOf(left + right, "the merge result " + shown(left + right) +
                                                 " is not in the vocabulary")};
  const auto [existing, added] = merges_.emplace(pairKey(leftId, rightId), merge);
  if (!added) {
    fail(name, where + " repeats the merge of line " + std::to_string(existing->second.rank + 2));
  }
}

void BpeTokenizer::findSpecialTokens() {
  std::vector<bool> ordinary(bytesOf_.size(), false);
  for (const std::int32_t id : byteToken_)
    ordinary[static_cast<std::size_t>(id)] = true;
  for (const auto& [pair, merge] : merges_)
    ordinary[static_cast<std::size_t>(merge.result)] = true;
  for (std::size_t id = 0; id < ordinary.size(); ++id) {
    if (!ordinary[id]) specials_.push_back(static_cast<std::int32_t>(id));
  }
}

std::optional<std::int32_t> BpeTokenizer::tokenId(std::string_view spelling) const {
  const auto found = ids_.find(std::string(spelling));
  if (found == ids_.end()) return std::nullopt;
  return found->second;
}

std::vector<std::int32_t> BpeTokenizer::encode(std::string_view text,
                                               SpecialTokens special) const {
  std::vector<std::int32_t> out;
  WordCache cache;
  std::size_t at = 0;
  while (special == SpecialTokens::kRecognised) {
    const auto [first, id] = nextSpecial(text, at);
    if (first == std::string_view::npos) break;
    encodeOrdinary(text.substr(at, first - at), at, cache, out);
    out.push_back(id);
    at = first + bytesOf_[static_cast<std::size_t>(id)].size();
  }
  encodeOrdinary(text.substr(at), at, cache, out);
  return out;
}

std::pair<std::size_t, std::int32_t> BpeTokenizer::nextSpecial(std::string_view text,
                                                               std::size_t at) const {
  std::size_t first = std::string_view::npos;
  std::int32_t id = -1;
  std::size_t length = 0;
  for (const std::int32_t candidate : specials_) {
    const std::string& bytes = bytesOf_[static_cast<std::size_t>(candidate)];
    const std::size_t found = text.find(bytes, at);
    const bool longer = found != std::string_view::npos && found == first && bytes.size() > length;
    if (found < first || longer) {
      first = found;
      id = candidate;
      length = bytes.size();
    }
  }
  return {first, id};
}

void BpeTokenizer::encodeOrdinary(std::string_view text, std::size_t offset, WordCache& cache,
                                  std::vector<std::int32_t>& out) const {
  pattern_->forEachWord(text, offset,
                        [&](std::string_view word) { encodeWord(word, cache, out); });
}

void BpeTokenizer::encodeWord(std::string_view word, WordCache& cache,
                              std::vector<std::int32_t>& out) const {
  auto found = cache.find(std::string(word));
  if (found == cache.end()) found = cache.emplace(std::string(word), mergeWord(word)).first;
  out.insert(out.end(), found->second.begin(), found->second.end());
}

std::vector<std::int32_t> BpeTokenizer::mergeWord(std::string_view word) const {
  std::vector<std::int32_t> symbols;
  for (const char c : word)
    symbols.push_back(byteToken_[static_cast<unsigned char>(c)]);
  std::vector<std::int32_t> merged;
  while (symbols.size() > 1) {
    const Merge* best = nullptr;
    std::uint64_t bestPair = 0;
    for (std::size_t i = 0; i + 1 < symbols.size(); ++i) {
      const auto found = merges_.find(pairKey(symbols[i], symbols[i + 1]));
      if (found != merges_.end() && (!best || found->second.rank < best->rank)) {
        best = &found->second;
        bestPair = found->first;
      }
    }
    if (!best) break;
    merged.clear();  // every occurrence of the best pair, left to right, as GPT-2 merges
    for (std::size_t i = 0; i < symbols.size(); ++i) {
      const bool match = i + 1 < symbols.size() && pairKey(symbols[i], symbols[i + 1]) == bestPair;
      merged.push_back(match ? best->result : symbols[i]);
      if (match) ++i;
    }
    symbols.swap(merged);
  }
  return symbols;
}

std::string BpeTokenizer::decode(std::span<const std::int32_t> ids) const {
  std::string text;
  for (const std::int32_t id : ids) {
    if (id < 0 || id >= vocabularySize()) {
      throw DataError("token id " + std::to_string(id) + " is outside the vocabulary of " +
                      std::to_string(vocabularySize()));
    }
    text += bytesOf_[static_cast<std::size_t>(id)];
  }
  return text;
}

}  // namespace ringtrain::data
