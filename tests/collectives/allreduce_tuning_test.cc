// The tuning table of the auto backend: lookup at and around each rule's bound, the file's JSON
// round trip, malformed files refused with the reason, and tables of another layout or CPU
// recognised as foreign.
#include "collectives/allreduce_tuning.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

namespace ringtrain::collectives {
namespace {


TuningTable fourRuleTable() {
  return {{4, 2},
          cpuModel(),
          ringtrainBuild(),
          {{1024, AllreduceAlgorithm::kRecursiveDoubling},
           {65536, AllreduceAlgorithm::kMpi},
           {1 << 20, AllreduceAlgorithm::kRingCached},
           {kUnboundedBytes, AllreduceAlgorithm::kHierarchical}}};
}

TEST(AllreduceTuning, ChooseTakesTheFirstRuleWhoseBoundHoldsTheSize) {
  const TuningTable table = fourRuleTable();
  EXPECT_EQ(table.choose(0), AllreduceAlgorithm::kRecursiveDoubling);
  EXPECT_EQ(table.choose(1024), AllreduceAlgorithm::kRecursiveDoubling);
  EXPECT_EQ(table.choose(1025), AllreduceAlgorithm::kMpi);
  EXPECT_EQ(table.choose(65536), AllreduceAlgorithm::kMpi);
  EXPECT_EQ(table.choose(65537), AllreduceAlgorithm::kRingCached);
  EXPECT_EQ(table.choose(1 << 20), AllreduceAlgorithm::kRingCached);
  EXPECT_EQ(table.choose((1 << 20) + 1), AllreduceAlgorithm::kHierarchical);
  EXPECT_EQ(table.choose(std::size_t{1} << 40), AllreduceAlgorithm::kHierarchical);
  EXPECT_EQ(table.recursiveDoublingBytes(), 1024u);
  EXPECT_TRUE(table.uses(AllreduceAlgorithm::kMpi));
  EXPECT_TRUE(table.uses(AllreduceAlgorithm::kRingCached));
  EXPECT_FALSE(table.uses(AllreduceAlgorithm::kRing));
}

TEST(AllreduceTuning, SizesAboveTheLastBoundTakeTheLastRule) {
  TuningTable table = fourRuleTable();
  table.rules.pop_back();
  EXPECT_EQ(table.choose(std::size_t{1} << 40), AllreduceAlgorithm::kRingCached);
}

TEST(AllreduceTuning, BuiltinTablesCoverEverySizeAndKeepRecursiveDoublingSmall) {
  for (const RankLayout layout : {RankLayout{2, 2}, RankLayout{3, 3}, RankLayout{8, 2}}) {
    const TuningTable table = builtinTuningTable(layout);
    EXPECT_EQ(table.layout, layout);
    EXPECT_EQ(table.rules.back().maxBytes, kUnboundedBytes);
    EXPECT_LE(table.recursiveDoublingBytes(), kMaxRecursiveDoublingBytes);
    EXPECT_NO_THROW(parseTuningTable(tuningTableText(table)));
  }
  // On one node the ring writes through the cache above recursive doubling's sizes, as
  // MPI_Allreduce does (docs/collectives.md, the built-in table).
  const TuningTable oneNode = builtinTuningTable(RankLayout{2, 2});
  EXPECT_EQ(oneNode.choose(8192), AllreduceAlgorithm::kRecursiveDoubling);
  EXPECT_EQ(oneNode.choose(8193), AllreduceAlgorithm::kRingCached);
  EXPECT_EQ(oneNode.choose(std::size_t{1} << 30), AllreduceAlgorithm::kRingCached);
}

TEST(AllreduceTuning, TextRoundTripKeepsEveryField) {
  const TuningTable table = fourRuleTable();
  const std::string text = tuningTableText(table);
  EXPECT_NE(text.find("\"world_size\": 4"), std::string::npos) << text;
  EXPECT_NE(text.find("\"max_bytes\": null"), std::string::npos) << text;
  EXPECT_NE(text.find("\"algorithm\": \"ring-cached\""), std::string::npos) << text;
  EXPECT_EQ(parseTuningTable(text), table);
}

// parseTuningTable(text) throws std::invalid_argument whose message contains `reason`.
void expectRefused(const std::string& text, const std::string& reason) {
  try {
    parseTuningTable(text);
    ADD_FAILURE() << "accepted: " << text;
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(reason), std::string::npos)
        << "message '" << e.what() << "' lacks '" << reason << "'";
  }
}

TEST(AllreduceTuning, MalformedTextsAreRefusedSayingWhy) {
  const std::string good = tuningTableText(fourRuleTable());
  auto edited = [&](const std::string& from, const std::string& to) {
    std::string text = good;
    const std::size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return text.replace(at, from.size(), to);
  };
  expectRefused("not json at all", "not valid");
  expectRefused("{\"rules\": []}", "not a ringtrain tuning table");
  expectRefused(edited("\"version\": 1", "\"version\": 7"), "format version 7");
  expectRefused(edited("\"world_size\": 4", "\"world_size\": 0"), "world_size must be at least 1");
  expectRefused(edited("\"mpi\"", "\"carrier-pigeon\""), "unknown algorithm 'carrier-pigeon'");
  expectRefused(edited("65536", "512"), "must ascend");
  expectRefused(edited("1024", "67108864"), "recursive-doubling takes at most");
  expectRefused(edited("65536", "null"), "null only in the last rule");
  expectRefused(edited("\"cpu\"", "\"gpu\""), "not valid");
}

TEST(AllreduceTuning, TablesOfAnotherLayoutCpuOrVersionAreForeign) {
  const TuningTable table = fourRuleTable();
  EXPECT_EQ(foreignTableReason(table, {4, 2}), std::nullopt);
  const auto layout = foreignTableReason(table, {2, 2});
  ASSERT_TRUE(layout.has_value());
  EXPECT_EQ(*layout, "measured for 4 ranks, 2 per node; this job has 2, 2 per node");
  EXPECT_TRUE(foreignTableReason(table, {4, 4}).has_value());
  TuningTable elsewhere = table;
  elsewhere.cpu = "Imaginary CPU 9000";
  const auto cpu = foreignTableReason(elsewhere, {4, 2});
  ASSERT_TRUE(cpu.has_value());
  EXPECT_NE(cpu->find("Imaginary CPU 9000"), std::string::npos) << *cpu;
  TuningTable stale = table;
  stale.build = "0.0.1";
  const auto version = foreignTableReason(stale, {4, 2});
  ASSERT_TRUE(version.has_value());
  EXPECT_EQ(*version, "measured by ringtrain 0.0.1, this is " + ringtrainBuild());
}

}  // namespace
}  // namespace ringtrain::collectives
