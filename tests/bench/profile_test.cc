// The gradient profiles of bench/profiles against the published figures of their models, the
// profile reader's refusals, and the arithmetic of `ringtrain bench` (stand-in plan, bound,
// statistics).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>

#include "models/model_factory.h"
#include "src/bench/gradient_profile.h"
#include "src/bench/profile_bench.h"
#include "training/config.h"

namespace ringtrain::bench {
namespace {

const std::filesystem::path kProfiles = RINGTRAIN_PROFILE_DIR;
const ProfileFolder kFolder{kProfiles, "the test's folder"};

struct Published {
  const char* name;
  std::size_t tensors;      // named parameter tensors of the model
  std::int64_t parameters;  // the figure its library publishes
};

// torchvision's model table; Hugging Face's bert-large-uncased BertModel (with the pooler);
// GPT-2 small with the output head tied to the token embedding.
constexpr Published kPublished[] = {{"resnet50", 161, 25'557'032},
                                    {"resnet101", 314, 44'549'160},
                                    {"vgg16", 32, 138'357'544},
                                    {"bert-large", 391, 335'141'888},
                                    {"gpt2-124m", 148, 124'439'808}};

TEST(GradientProfile, EveryProfileHasItsModelsPublishedSize) {
  for (const Published& p : kPublished) {
    SCOPED_TRACE(p.name);
    const GradientProfile profile = readProfile(profileFile(p.name, kFolder));
    EXPECT_EQ(profile.name, p.name);
    EXPECT_EQ(profile.tensors.size(), p.tensors);
    EXPECT_EQ(profile.parameters(), p.parameters);
    EXPECT_GT(profile.flopsPerSample(), 0);
  }
}

// The profile is ringtrain's own gpt2-124m: the same tensors, names and shapes, with backward
// finishing them in the reverse of the buffer's order.
TEST(GradientProfile, Gpt2ProfileIsRingtrainsGpt2Model) {
  models::ModelSpec spec;
  spec.name = "gpt";
  spec.gpt = training::presetShape(training::GptPreset::kGpt2Small);
  spec.input = {1, spec.gpt.context, 1};
  const GradientProfile profile = readProfile(profileFile("gpt2-124m", kFolder));
  EXPECT_EQ(static_cast<double>(profile.parameters()), models::parameterCount(spec));
  const models::Model<float> model = models::makeModel<float>(spec);
  const auto table = model.parameterTable();
  ASSERT_EQ(table.size(), profile.tensors.size());
  for (std::size_t i = 0; i < table.size(); ++i) {
    const ProfileTensor& tensor = profile.tensors[profile.tensors.size() - 1 - i];
    EXPECT_EQ(tensor.name, table[i].name);
    EXPECT_EQ(tensor.shape, std::vector<std::int64_t>(table[i].shape.begin(), table[i].shape.end()))
        << tensor.name;
  }
}

std::filesystem::path writeFile(const std::string& name, const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() / name;
  std::ofstream(path) << text;
  return path;
}

void expectRefused(const std::string& text, const std::string& message) {
  const auto path = writeFile("ringtrain_profile_test.txt", text);
  try {
    readProfile(path);
    ADD_FAILURE() << "accepted: " << text;
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
  }
  std::filesystem::remove(path);
}

TEST(GradientProfile, BadLinesAreRefusedWithTheirLineNumber) {
  expectRefused("# comment\na 2x3 10\nb 2xx3 10\n", "line 3: shape '2xx3'");
  expectRefused("a 2x3 10\nb 0 10\n", "line 2: shape '0'");
  expectRefused("a 2x3\n", "line 1: expected 'name shape flops-per-sample'");
  expectRefused("a 2x3 10 extra\n", "line 1: expected");
  expectRefused("\na 2x3 -1\n", "line 2: flops '-1'");
  expectRefused("a 2x3 ten\n", "line 1: flops 'ten'");
  expectRefused("a 2 1\nb 2 1\na 3 1\n", "line 3: tensor a was listed already");
  expectRefused("# only comments\n", "no tensor in the file");
}

TEST(GradientProfile, NamesAreLookedUpInTheFolderAndPathsTakenAsGiven) {
  EXPECT_EQ(profileFile("vgg16", kFolder), kProfiles / "vgg16.txt");
  EXPECT_EQ(profileFile("some/where.txt", kFolder), "some/where.txt");
  EXPECT_EQ(profileFile("mine.txt", kFolder), "mine.txt");
  try {
    profileFile("resnet5", kFolder);
    ADD_FAILURE() << "resnet5 found";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("--profile resnet5: no such profile in " +
                                         kProfiles.string() + " (the test's folder; known:"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("resnet50, vgg16"), std::string::npos) << e.what();
  }
}

TEST(GradientProfile, TheFolderIsTheVariablesWhenSetElseBesideTheProgram) {
  const ProfileFolder beside = profileFolder("/opt/rt/bin/ringtrain", nullptr);
  EXPECT_EQ(beside.path, "/opt/rt/share/ringtrain/profiles");
  EXPECT_EQ(beside.origin, "beside the program /opt/rt/bin/ringtrain");
  EXPECT_EQ(profileFolder("/opt/rt/bin/ringtrain", "").path, beside.path);  // empty: unset
  const ProfileFolder given = profileFolder("/opt/rt/bin/ringtrain", "/data/profiles");
  EXPECT_EQ(given.path, "/data/profiles");
  EXPECT_EQ(given.origin, "RINGTRAIN_PROFILE_DIR");
}

TEST(GradientProfile, AMissingFolderIsNamedWithWhereItCameFromAndTheVariable) {
  const ProfileFolder missing = profileFolder("/nowhere/bin/ringtrain", nullptr);
  try {
    profileFile("resnet50", missing);
    ADD_FAILURE() << "resnet50 found in /nowhere";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "--profile resnet50: looked in /nowhere/share/ringtrain/profiles (beside the "
                  "program /nowhere/bin/ringtrain): no such folder; set RINGTRAIN_PROFILE_DIR"),
              std::string::npos)
        << e.what();
  }
}

TEST(ProfileBench, StandInSharesTheComputeByFlops) {
  GradientProfile profile{"p", {{"a", {2}, 100}, {"b", {3}, 0}, {"c", {4}, 300}}};
  const StandInPlan plan = planStandIn(profile, 90);
  EXPECT_DOUBLE_EQ(plan.forwardSeconds, 0.030);
  ASSERT_EQ(plan.backwardSeconds.size(), 3u);
  EXPECT_DOUBLE_EQ(plan.backwardSeconds[0], 0.015);
  EXPECT_DOUBLE_EQ(plan.backwardSeconds[1], 0.0);
  EXPECT_DOUBLE_EQ(plan.backwardSeconds[2], 0.045);
  // Without FLOPs the backward is shared evenly.
  profile.tensors[0].flopsPerSample = profile.tensors[2].flopsPerSample = 0;
  const StandInPlan even = planStandIn(profile, 90);
  EXPECT_DOUBLE_EQ(even.backwardSeconds[1], 0.020);
}

TEST(ProfileBench, BoundIsTheRingAllReduceOrTheCompute) {
  // 4 ranks, 100 MB at 1 Gbit/s: 2*3/4 * 8e8 bit / 1e9 bit/s = 1.2 s, plus 2*3*10 latencies.
  const StepBound b = stepBound(100, 4, 1e8, 10, 1, 50);
  ASSERT_TRUE(b.communicationSeconds.has_value());
  EXPECT_NEAR(*b.communicationSeconds, 1.2 + 60 * 50e-6, 1e-12);
  EXPECT_NEAR(b.stepSeconds, *b.communicationSeconds, 1e-12);
  EXPECT_DOUBLE_EQ(stepBound(1500, 4, 1e8, 10, 1, 0).stepSeconds, 1.5);
  const StepBound unshaped = stepBound(100, 4, 1e8, 10, 0, 0);
  EXPECT_FALSE(unshaped.communicationSeconds.has_value());
  EXPECT_DOUBLE_EQ(unshaped.stepSeconds, 0.1);
  EXPECT_DOUBLE_EQ(*stepBound(100, 1, 1e8, 10, 1, 0).communicationSeconds, 0.0);
}

TEST(ProfileBench, StatisticsAsNumpyComputesThem) {
  const std::vector<double> v = {4, 1, 3, 2, 5};
  EXPECT_DOUBLE_EQ(percentile(v, 50), 3);
  EXPECT_DOUBLE_EQ(percentile(v, 95), 4.8);  // numpy.percentile([1..5], 95)
  EXPECT_DOUBLE_EQ(mean(v), 3);
  EXPECT_NEAR(ci95(v), 1.96 * std::sqrt(2.5), 1e-12);  // sample variance 2.5
  EXPECT_DOUBLE_EQ(ci95({7}), 0);
}

}  // namespace
}  // namespace ringtrain::bench
