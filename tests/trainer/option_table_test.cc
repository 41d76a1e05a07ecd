// The option tables of `ringtrain train`, `bench` and `generate`: every option has a verdict on
// whether ranks must agree (and the start-up comparison follows it), docs/options.md lists every
// option and the per-rank ones, errors name where a value came from, and RINGTRAIN_* variables
// that name no option are warned about.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "options/exchange_settings.h"
#include "src/bench/bench_config.h"
#include "src/commands/script_variables.h"
#include "training/config.h"

namespace ringtrain::training {
namespace {

using bench::BenchConfig;
using bench::benchOptionTable;
using bench::parseBenchConfig;
using options::Agreement;
using ::testing::HasSubstr;

template <class Config, class Parse>
std::optional<std::string> parseWords(Parse parse, std::vector<std::string> words, Config& config,
                                      std::string* helpText = nullptr) {
  std::vector<const char*> argv = {"program"};
  for (const auto& w : words)
    argv.push_back(w.c_str());
  bool help = false;
  std::string text;
  auto error = parse(static_cast<int>(argv.size()), argv.data(), config, help, text);
  if (helpText) *helpText = text;
  return error;
}

std::optional<std::string> train(std::vector<std::string> words, TrainConfig& c,
                                 std::string* help = nullptr) {
  return parseWords(parseTrainConfig, std::move(words), c, help);
}

std::string readFile(const std::filesystem::path& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

class OptionTableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("ringtrain_option_table_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    for (const char* name :
         {"RINGTRAIN_BATCH_SIZE", "RINGTRAIN_LR", "RINGTRAIN_BATCHSIZE", "RINGTRAIN_BUILD_DIR",
          "RINGTRAIN_PROFILE", "RINGTRAIN_CHUNKS", "RINGTRAIN_CONFIG", "RINGTRAIN_AGG_ITERS"})
      ::unsetenv(name);
    std::filesystem::remove_all(dir_);
  }
  std::filesystem::path dir_;
};

// A text for `option` that reads without error and changes what it writes, or nullopt.
template <class Config>
std::optional<std::string> anotherValue(const options::Option<Config>& option, const Config& base) {
  std::vector<std::string> candidates = option.choices;
  for (const char* text : {"7", "3", "0.5", "2", "1", "somewhere", "3,3,3", "64K"})
    candidates.emplace_back(text);
  for (const std::string& text : candidates) {
    Config changed = base;
    if (option.read(changed, text)) continue;
    if (option.check && option.check(changed)) continue;
    if (option.write(changed) != option.write(base)) return text;
  }
  return std::nullopt;
}

// Walks every option of a program: changing a compared option (or giving one compared by
// presence) changes what ranks compare at start; changing a per-rank option does not.
template <class Config>
void expectComparisonFollowsTheTable(const options::Table<Config>& table, const Config& base) {
  for (const options::Option<Config>& option : table) {
    if (option.hidden) continue;
    const auto text = anotherValue(option, base);
    ASSERT_TRUE(text) << "--" << option.name << ": no other value found to compare with";
    Config changed = base;
    ASSERT_FALSE(option.read(changed, *text)) << option.name;
    const bool differs = comparableOptions(changed) != comparableOptions(base);
    if (option.agreement == Agreement::kPerRank) {
      EXPECT_FALSE(differs) << "--" << option.name << " is per rank but compared";
    } else {
      EXPECT_TRUE(differs) << "--" << option.name << " " << *text << " is not compared";
    }
  }
}

TEST_F(OptionTableTest, EveryTrainOptionIsComparedOrAllowedToDifferAsItsTableSays) {
  TrainConfig base;
  ASSERT_FALSE(train({"--model", "gpt", "--synthetic"}, base));  // the GPT's sizes apply
  expectComparisonFollowsTheTable(trainOptionTable(), base);
}

TEST_F(OptionTableTest, EveryBenchOptionIsComparedOrAllowedToDifferAsItsTableSays) {
  BenchConfig base;
  expectComparisonFollowsTheTable(benchOptionTable(), base);
}

// The options that shaped collectives after start and deadlocked when one rank alone had them.
TEST_F(OptionTableTest, CheckpointFolderAndScheduleAreCompared) {
  TrainConfig none, folder, every;
  ASSERT_FALSE(train({"--synthetic"}, none));
  ASSERT_FALSE(train({"--synthetic", "--checkpoint-dir", "/a"}, folder));
  ASSERT_FALSE(train({"--synthetic", "--checkpoint-every", "50"}, every));
  EXPECT_NE(comparableOptions(none), comparableOptions(folder));
  EXPECT_NE(comparableOptions(none), comparableOptions(every));
  TrainConfig elsewhere;  // the same, written to another path: only rank 0 writes
  ASSERT_FALSE(train({"--synthetic", "--checkpoint-dir", "/b"}, elsewhere));
  EXPECT_EQ(comparableOptions(folder), comparableOptions(elsewhere));
}

// docs/options.md names every option of the three programs, and its per-rank list is exactly
// the tables' per-rank options of train and bench.
TEST_F(OptionTableTest, TheDocsListEveryOptionAndThePerRankOnes) {
  const std::string docs = readFile(RINGTRAIN_SOURCE_DIR "/docs/options.md");
  ASSERT_FALSE(docs.empty());
  std::set<std::string> perRank;
  const auto walk = [&](const auto& table, const std::string& program) {
    for (const auto& option : table) {
      if (option.hidden) continue;
      EXPECT_THAT(docs, HasSubstr("`--" + option.name))
          << program << " --" << option.name << " is not in docs/options.md";
      if (option.agreement == Agreement::kPerRank && program != "generate")
        perRank.insert(option.name);
    }
  };
  walk(trainOptionTable(), "train");
  walk(benchOptionTable(), "bench");
  walk(generateOptionTable(), "generate");
  const std::size_t start = docs.find("<!-- per-rank options -->");
  const std::size_t end = docs.find("<!-- end of per-rank options -->");
  ASSERT_NE(start, std::string::npos);
  ASSERT_NE(end, std::string::npos);
  std::set<std::string> listed;
  const std::string section = docs.substr(start, end - start);
  const std::regex option("`--([a-z0-9-]+)`");
  for (auto it = std::sregex_iterator(section.begin(), section.end(), option);
       it != std::sregex_iterator(); ++it)
    listed.insert((*it)[1]);
  EXPECT_EQ(listed, perRank);
}

TEST_F(OptionTableTest, RangeErrorsNameTheVariableOrTheFileAndLine) {
  ::setenv("RINGTRAIN_BATCH_SIZE", "0", 1);
  TrainConfig c;
  auto error = train({"--synthetic"}, c);
  ASSERT_TRUE(error);
  EXPECT_EQ(*error, "RINGTRAIN_BATCH_SIZE=0: --batch-size must be at least 1 (got 0)");
  ::unsetenv("RINGTRAIN_BATCH_SIZE");
  ::setenv("RINGTRAIN_LR", "nan", 1);
  error = train({"--synthetic"}, c);
  ASSERT_TRUE(error);
  EXPECT_EQ(*error, "RINGTRAIN_LR=nan: --lr must be a finite number (got nan)");
  ::unsetenv("RINGTRAIN_LR");
  const std::string file = (dir_ / "run.cfg").string();
  std::ofstream(file) << "epochs = 2\nbatch-size = 0\n";
  error = train({"--synthetic", "--config", file}, c);
  ASSERT_TRUE(error);
  EXPECT_EQ(*error, "--config " + file +
                        " line 2: batch-size = 0: --batch-size must be at least 1 (got 0)");
}

TEST_F(OptionTableTest, AConfigThatIsNoRegularFileIsRefusedWithoutOpeningIt) {
  TrainConfig c;
  auto error = train({"--synthetic", "--config", dir_.string()}, c);
  ASSERT_TRUE(error) << "a folder as --config was accepted";
  EXPECT_THAT(*error, HasSubstr("--config " + dir_.string() + ": is a folder"));
  const std::string fifo = (dir_ / "fifo.cfg").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  error = train({"--synthetic", "--config", fifo}, c);  // would block in open()
  ASSERT_TRUE(error);
  EXPECT_THAT(*error, HasSubstr("not a regular file"));
}

TEST_F(OptionTableTest, ABinaryConfigFileIsQuotedShortAndEscaped) {
  const std::string file = (dir_ / "binary.cfg").string();
  std::string bytes;
  for (int i = 0; i < 600; ++i)
    bytes += static_cast<char>((i * 37 + 11) % 256 == '\n' ? 1 : (i * 37 + 11) % 256);
  std::ofstream(file, std::ios::binary) << bytes;
  TrainConfig c;
  const auto error = train({"--synthetic", "--config", file}, c);
  ASSERT_TRUE(error);
  EXPECT_LT(error->size(), 400u) << *error;
  for (const char ch : *error)
    EXPECT_TRUE(std::isprint(static_cast<unsigned char>(ch))) << "raw byte in: " << *error;
  EXPECT_THAT(*error, HasSubstr("line 1: "));
}

TEST_F(OptionTableTest, AnUnknownVariableIsWarnedAboutWithTheClosestOption) {
  ::setenv("RINGTRAIN_BATCHSIZE", "0", 1);
  ::setenv("RINGTRAIN_BUILD_DIR", "build", 1);  // the scripts'
  ::setenv("RINGTRAIN_PROFILE", "vgg16", 1);    // ringtrain bench's
  // As main.cc does: the scripts' variables are known, bench's options another program's.
  options::registerKnownVariables(commands::scriptVariables());
  options::registerProgramOptions(options::specsOf(benchOptionTable()));
  TrainConfig c;
  ASSERT_FALSE(train({"--synthetic"}, c));
  ASSERT_EQ(c.parseWarnings.size(), 1u) << ::testing::PrintToString(c.parseWarnings);
  EXPECT_EQ(c.parseWarnings[0],
            "RINGTRAIN_BATCHSIZE names no option of ringtrain train: ignored (did you mean "
            "RINGTRAIN_BATCH_SIZE, --batch-size?)");
}

// Every RINGTRAIN_* name the scripts use is an option's variable or in the list of the scripts'
// own (which are never warned about).
TEST_F(OptionTableTest, TheScriptsVariablesAreKnown) {
  std::set<std::string> known(commands::scriptVariables().begin(),
                              commands::scriptVariables().end());
  for (const auto& spec : options::specsOf(trainOptionTable()))
    known.insert(options::variableNameOf(spec.name));
  for (const auto& spec : options::specsOf(benchOptionTable()))
    known.insert(options::variableNameOf(spec.name));
  known.insert("RINGTRAIN_CONFIG");
  const std::regex variable("RINGTRAIN_[A-Z0-9_]*[A-Z0-9]");
  std::size_t files = 0;
  for (const char* folder : {"scripts", "data", "k8s"}) {
    for (const auto& entry : std::filesystem::recursive_directory_iterator(
             std::string(RINGTRAIN_SOURCE_DIR) + "/" + folder)) {
      const std::string extension = entry.path().extension().string();
      if (!entry.is_regular_file() ||
          (extension != ".sh" && extension != ".sbatch" && extension != ".yaml" &&
           entry.path().filename() != "Dockerfile"))
        continue;
      ++files;
      const std::string text = readFile(entry.path());
      for (auto it = std::sregex_iterator(text.begin(), text.end(), variable);
           it != std::sregex_iterator(); ++it)
        EXPECT_TRUE(known.count(it->str())) << it->str() << " in " << entry.path();
    }
  }
  EXPECT_GT(files, 10u);
}

TEST_F(OptionTableTest, OneByteSizeAndOneBooleanSpellingForEveryOption) {
  for (const char* size : {"64M", "64MB", "64MiB", "67108864"}) {
    TrainConfig c;
    ASSERT_FALSE(train({"--synthetic", "--fusion-threshold", size}, c)) << size;
    EXPECT_EQ(c.exchange.fusionThresholdBytes, std::size_t{64} << 20) << size;
  }
  for (const auto& [words, overlap] :
       std::vector<std::pair<std::vector<std::string>, bool>>{{{"--overlap=true"}, true},
                                                              {{"--overlap", "off"}, false},
                                                              {{"--overlap=0"}, false},
                                                              {{"--overlap", "yes"}, true}}) {
    TrainConfig c;
    std::vector<std::string> all = {"--synthetic"};
    all.insert(all.end(), words.begin(), words.end());
    ASSERT_FALSE(train(all, c)) << words[0];
    EXPECT_EQ(c.exchange.overlap, overlap) << words[0];
  }
  TrainConfig c;
  ASSERT_FALSE(train({"--synthetic=1", "--nesterov=on", "--drop-last"}, c));
  EXPECT_TRUE(c.synthetic && c.nesterov && c.dropLast);
}

TEST_F(OptionTableTest, HelpShowsDefaultsAsWritten) {
  TrainConfig c;
  std::string help;
  ASSERT_FALSE(train({"--help"}, c, &help));
  EXPECT_THAT(help, HasSubstr("--momentum arg (=0.9)"));
  EXPECT_THAT(help, HasSubstr("--fusion-threshold arg (=8M)"));
  EXPECT_THAT(help, ::testing::Not(HasSubstr("0.9000000")));
  EXPECT_THAT(help, HasSubstr("docs/options.md"));
}

// The library facade reads its six variables through the exchange's rows: each gives the value
// `ringtrain train` takes from it, or train's error.
TEST_F(OptionTableTest, TheLibraryReadsTheExchangeVariablesAsTrainDoes) {
  const auto rows = options::exchangeOptionRows<engine::ExchangeSettings>("");
  const std::pair<const char*, const char*> cases[] = {
      {"RINGTRAIN_BACKEND", "ring"},       {"RINGTRAIN_TUNING_FILE", "table.json"},
      {"RINGTRAIN_OVERLAP", "off"},        {"RINGTRAIN_FUSION_THRESHOLD", "64K"},
      {"RINGTRAIN_COMPRESSION", "bf16"},   {"RINGTRAIN_STALL_TIMEOUT", "7"},
      {"RINGTRAIN_BACKEND", "gloo"},       {"RINGTRAIN_OVERLAP", "maybe"},
      {"RINGTRAIN_FUSION_THRESHOLD", "0"}, {"RINGTRAIN_COMPRESSION", "fp8"},
      {"RINGTRAIN_STALL_TIMEOUT", "-1"}};
  for (const auto& [variable, text] : cases) {
    ::setenv(variable, text, 1);
    engine::ExchangeSettings library;
    const auto libraryError = options::readVariables(rows, library);
    TrainConfig trained;
    const auto trainError = train({"--synthetic"}, trained);
    ::unsetenv(variable);
    EXPECT_EQ(libraryError, trainError) << variable << "=" << text;
    if (trainError) {
      ASSERT_TRUE(libraryError) << variable << "=" << text;
      EXPECT_THAT(*libraryError, ::testing::StartsWith(std::string(variable) + "=" + text + ": "));
    } else {
      EXPECT_EQ(library, trained.exchange) << variable << "=" << text;
      EXPECT_NE(library, engine::ExchangeSettings{}) << variable << "=" << text << " was not read";
    }
  }
}

// --print-config gives the configuration read, presets resolved, as a --config file that gives it
// back; scripts read the GPT's shape from it.
TEST_F(OptionTableTest, PrintConfigWritesTheConfigurationAsAConfigFile) {
  TrainConfig printed;
  std::string text;
  ASSERT_FALSE(train({"--model", "gpt2-124m", "--layers", "2", "--print-config"}, printed, &text));
  for (const char* line : {"model = gpt\n", "layers = 2\n", "heads = 12\n", "width = 768\n",
                           "context = 1024\n", "vocab = 50257\n"})
    EXPECT_THAT(text, HasSubstr(line));
  const std::string file = (dir_ / "printed.cfg").string();
  std::ofstream(file) << text;
  TrainConfig read, given;
  ASSERT_FALSE(train({"--config", file, "--synthetic"}, read));
  ASSERT_FALSE(train({"--model", "gpt2-124m", "--layers", "2", "--synthetic"}, given));
  EXPECT_EQ(comparableOptions(read), comparableOptions(given));

  BenchConfig bench;
  ASSERT_FALSE(parseWords(parseBenchConfig, {"--chunks", "3", "--print-config"}, bench, &text));
  EXPECT_THAT(text, HasSubstr("chunks = 3\n"));
  EXPECT_THAT(text, HasSubstr("fusion-threshold = 8388608\n"));
}

TEST_F(OptionTableTest, BenchReadsVariablesAndConfigFilesAndOffersNoNccl) {
  ::setenv("RINGTRAIN_CHUNKS", "3", 1);
  const std::string file = (dir_ / "bench.cfg").string();
  std::ofstream(file) << "steps-per-chunk = 4\n";
  BenchConfig b;
  ASSERT_FALSE(parseWords(parseBenchConfig, {"--config", file}, b));
  EXPECT_EQ(b.chunks, 3);
  EXPECT_EQ(b.stepsPerChunk, 4);
  std::string help;
  BenchConfig h;
  ASSERT_FALSE(parseWords(parseBenchConfig, {"--help"}, h, &help));
  const std::size_t backend = help.find("--backend");
  ASSERT_NE(backend, std::string::npos);
  EXPECT_THAT(help.substr(backend, help.find("--", backend + 2) - backend),
              ::testing::Not(HasSubstr("| nccl")));
}

TEST_F(OptionTableTest, GenerateReadsItsTable) {
  GenerationOptions o;
  auto error = parseWords(parseGenerateConfig, {"--prompt", "hi"}, o);
  ASSERT_TRUE(error);
  EXPECT_EQ(*error, "--checkpoint is required");
  error = parseWords(parseGenerateConfig, {"--checkpoint", "c.h5", "--tokens", "0"}, o);
  ASSERT_TRUE(error);
  EXPECT_EQ(*error, "--tokens must be at least 1 (got 0)");
  ASSERT_FALSE(parseWords(parseGenerateConfig, {"--checkpoint", "c.h5", "--top-k", "5"}, o));
  EXPECT_EQ(o.topK, 5);
  EXPECT_EQ(o.checkpoint, "c.h5");
}

// A table of no program, for the machinery's own capabilities.
struct Sample {
  std::size_t minBytes = 8;
  int aggIters = 1;
  std::string first;
  std::string second;
};

options::Table<Sample> sampleTable() {
  options::Table<Sample> table = {
      options::number<Sample>(
          "minbytes", [](Sample & s) -> auto& { return s.minBytes; }, options::kAny,
          "smallest size"),
      options::number<Sample>(
          "agg_iters", [](Sample & s) -> auto& { return s.aggIters; }, options::kPositive,
          "calls per iteration"),
      options::text<Sample>(
          "first", [](Sample & s) -> auto& { return s.first; }, "a file"),
      options::text<Sample>(
          "second", [](Sample & s) -> auto& { return s.second; }, "another")};
  table[0].letter = 'b';
  table[2].positional = true;
  table[3].positional = true;
  return table;
}

std::optional<std::string> sample(std::vector<std::string> words, Sample& s,
                                  options::Outcome& outcome, bool forwards = false) {
  std::vector<const char*> argv = {"sample"};
  for (const auto& w : words)
    argv.push_back(w.c_str());
  const options::Program program{"sample", "usage: sample [options]", forwards};
  return options::parse(program, sampleTable(), static_cast<int>(argv.size()), argv.data(), s,
                        outcome);
}

TEST_F(OptionTableTest, AOneLetterAliasReadsAndShowsInHelp) {
  Sample s;
  options::Outcome outcome;
  ASSERT_FALSE(sample({"-b", "64", "--agg_iters", "3"}, s, outcome));
  EXPECT_EQ(s.minBytes, 64U);
  EXPECT_EQ(s.aggIters, 3);
  ASSERT_FALSE(sample({"--help"}, s, outcome));
  EXPECT_THAT(outcome.helpText, HasSubstr("-b [ --minbytes ] arg (=8)"));
  // An underscore in the name: the variable is RINGTRAIN_AGG_ITERS, no misspelling.
  ::setenv("RINGTRAIN_AGG_ITERS", "4", 1);
  Sample v;
  ASSERT_FALSE(sample({}, v, outcome));
  EXPECT_EQ(v.aggIters, 4);
  EXPECT_TRUE(outcome.warnings.empty()) << outcome.warnings.front();
}

TEST_F(OptionTableTest, PositionalOptionsTakeTheBareArgumentsInOrder) {
  Sample s;
  options::Outcome outcome;
  ASSERT_FALSE(sample({"a.h5", "-b", "16", "b.out"}, s, outcome));
  EXPECT_EQ(s.first, "a.h5");
  EXPECT_EQ(s.second, "b.out");
  Sample named;
  ASSERT_FALSE(sample({"--second", "y", "x"}, named, outcome));
  EXPECT_EQ(named.first, "x");
  EXPECT_EQ(named.second, "y");
  Sample extra;
  const auto error = sample({"a", "b", "c"}, extra, outcome);
  ASSERT_TRUE(error);
  EXPECT_THAT(*error, HasSubstr("too many positional options"));
}

TEST_F(OptionTableTest, AForwardingProgramLeavesTheRestAndConfigInOrder) {
  ::setenv("RINGTRAIN_CONFIG", (dir_ / "none.conf").c_str(), 1);  // the other table's
  Sample s;
  options::Outcome outcome;
  ASSERT_FALSE(sample({"--data", "d", "-b", "16", "bare", "--config", "f.conf", "--lr=0.1"}, s,
                      outcome, true));
  EXPECT_EQ(s.minBytes, 16U);
  EXPECT_EQ(s.first, "");
  EXPECT_THAT(outcome.rest,
              ::testing::ElementsAre("--data", "d", "bare", "--config", "f.conf", "--lr=0.1"));
  EXPECT_EQ(outcome.configFile, "");
}

}  // namespace
}  // namespace ringtrain::training
