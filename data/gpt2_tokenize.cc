// gpt2_tokenize: text to token files in llm.c's format and back, with GPT-2's tokenizer.
//
//   gpt2_tokenize encode [--vocab DIR] [--special] --out OUT.bin TEXT...
//   gpt2_tokenize decode [--vocab DIR] [--out TEXT] FILE.bin
//   gpt2_tokenize info [--vocab DIR] FILE.bin
//
// See helpText() for what each does. Errors: one line naming the file, exit status 1; bad
// arguments: the usage, exit status 2.
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "data/bpe_tokenizer.h"
#include "data/data_error.h"
#include "data/token_file.h"
#include "formats/file_bytes.h"

namespace {

namespace fs = std::filesystem;
using ringtrain::data::BpeTokenizer;
using ringtrain::data::DataError;

enum class Mode { kEncode, kDecode, kInfo };

struct Options {
  Mode mode = Mode::kEncode;
  fs::path vocab = "data/gpt2";
  bool special = false;
  fs::path out;
  std::vector<fs::path> inputs;
};

constexpr char kUsage[] =
    "usage: gpt2_tokenize encode [--vocab DIR] [--special] --out OUT.bin TEXT...\n"
    "       gpt2_tokenize decode [--vocab DIR] [--out TEXT] FILE.bin\n"
    "       gpt2_tokenize info [--vocab DIR] FILE.bin\n";

const char* helpText() {
  return "\n"
         "GPT-2's byte-level BPE tokenizer over token files in llm.c's format (a 256-int32\n"
         "header, magic 20240520, version 1, then uint16 token ids).\n"
         "\n"
         "  encode   tokenises the UTF-8 text files, each on its own, and writes their tokens one\n"
         "           after the other into OUT.bin; prints the token count.\n"
         "  decode   writes the text of FILE.bin's tokens to TEXT (default: standard output).\n"
         "  info     checks FILE.bin and prints its token count, distinct ids and unigram\n"
         "           entropy in nats (the loss of a model that learned only token frequencies).\n"
         "\n"
         "  --vocab DIR  folder with GPT-2's encoder.json and vocab.bpe (default data/gpt2;\n"
         "               data/fetch_gpt2_vocab.sh DIR fetches them)\n"
         "  --special    the text \"<|endoftext|>\" becomes the token 50256 (otherwise it is\n"
         "               encoded as the 13 characters it is)\n"
         "  --out PATH   the file to write\n"
         "  --help       this text\n";
}

std::string readText(const fs::path& path) {
  ringtrain::formats::FileContent content(path);
  const auto bytes = content.readUpTo(content.maxContentBytes());
  return std::string(bytes.begin(), bytes.end());
}

// The ids of the text of file `path` as uint16, errors prefixed with its name.
std::vector<std::uint16_t> encodeText(const BpeTokenizer& tokenizer, const std::string& text,
                                      const fs::path& path, bool special) {
  std::vector<std::int32_t> ids;
  try {
    ids = tokenizer.encode(text, special ? ringtrain::data::SpecialTokens::kRecognised
                                                   : ringtrain::data::SpecialTokens::kAsText);
  } catch (const DataError& e) {
    const std::string what = e.what();
    if (what.starts_with(path.string() + ":")) throw;
    throw DataError(path.string() + ": " + what);
  }
  std::vector<std::uint16_t> tokens;
  tokens.reserve(ids.size());
  for (const std::int32_t id : ids) {
    if (id >= ringtrain::data::kMaxTokenVocabulary) {
      throw DataError(path.string() + ": token id " + std::to_string(id) +
                      " does not fit a token file's uint16");
    }
    tokens.push_back(static_cast<std::uint16_t>(id));
  }
  return tokens;
}

void encode(const Options& options) {
  const BpeTokenizer tokenizer = BpeTokenizer::loadFolder(options.vocab);
  std::vector<std::uint16_t> tokens;
  std::uintmax_t bytes = 0;
  for (const fs::path& input : options.inputs) {
    const std::string text = readText(input);
    const auto more = encodeText(tokenizer, text, input, options.special);
    tokens.insert(tokens.end(), more.begin(), more.end());
    bytes += text.size();
  }
  ringtrain::data::writeTokenFile(options.out, tokens);
  std::printf("gpt2_tokenize: %s: %zu tokens from %ju bytes of text in %zu file(s)\n",
              options.out.c_str(), tokens.size(), bytes, options.inputs.size());
}

void decode(const Options& options) {
  const BpeTokenizer tokenizer = BpeTokenizer::loadFolder(options.vocab);
  const auto tokens =
      ringtrain::data::readTokenFile(options.inputs[0], tokenizer.vocabularySize());
  const std::vector<std::int32_t> ids(tokens.begin(), tokens.end());
  const std::string text = tokenizer.decode(ids);
  if (options.out.empty()) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    if (std::fflush(stdout) != 0) throw DataError("standard output: write error");
    return;
  }
  ringtrain::formats::writeFileAtomically(
      options.out, std::span(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()));
}

void info(const Options& options) {
  const BpeTokenizer tokenizer = BpeTokenizer::loadFolder(options.vocab);
  const auto tokens =
      ringtrain::data::readTokenFile(options.inputs[0], tokenizer.vocabularySize());
  const auto statistics = ringtrain::data::tokenStatistics(tokens);
  std::printf("%s: %lld tokens, %lld distinct ids, unigram entropy %.4f nats\n",
              options.inputs[0].c_str(), static_cast<long long>(statistics.count),
              static_cast<long long>(statistics.distinct), statistics.unigramEntropyNats);
}

int usage() {
  std::fputs(kUsage, stderr);
  std::fputs("(gpt2_tokenize --help says more)\n", stderr);
  return 2;
}

bool parseMode(const std::string& word, Mode& mode) {
  if (word == "encode") mode = Mode::kEncode;
  else if (word == "decode") mode = Mode::kDecode;
  else if (word == "info") mode = Mode::kInfo;
  else return false;
  return true;
}

// Whether the options make a whole command: encode needs --out and a text; decode and info one
// token file (and info no --out).
bool complete(const Options& options) {
  switch (options.mode) {
    case Mode::kEncode:
      return !options.out.empty() && !options.inputs.empty();
    case Mode::kDecode:
      return options.inputs.size() == 1 && !options.special;
    case Mode::kInfo:
      return options.inputs.size() == 1 && !options.special && options.out.empty();
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--help") {
      std::fputs(kUsage, stdout);
      std::fputs(helpText(), stdout);
      return 0;
    }
  }
  Options options;
  if (argc < 2 || !parseMode(argv[1], options.mode)) return usage();
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool hasValue = i + 1 < argc;
    if (arg == "--vocab" && hasValue) {
      options.vocab = argv[++i];
    } else if (arg == "--out" && hasValue) {
      options.out = argv[++i];
    } else if (arg == "--special") {
      options.special = true;
    } else if (arg.starts_with("-")) {
      return usage();
    } else {
      options.inputs.emplace_back(arg);
    }
  }
  if (!complete(options)) return usage();
  try {
    if (options.mode == Mode::kEncode) encode(options);
    if (options.mode == Mode::kDecode) decode(options);
    if (options.mode == Mode::kInfo) info(options);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpt2_tokenize: error: %s\n", e.what());
    return 1;
  }
}
