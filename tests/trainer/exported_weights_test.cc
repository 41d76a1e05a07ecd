// Exported weights: the GPT's Hugging Face layout (which tensors are transposed, and how), the
// round trip export -> file -> model, and the first mismatch named in the file's layout.
#include "training/exported_weights.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "models/model_factory.h"
#include "storage/checkpoint_model.h"

namespace ringtrain::training {
namespace {

namespace fs = std::filesystem;

models::ModelSpec gptSpec(models::Index width = 8) {
  models::ModelSpec spec;
  spec.name = "gpt";
  spec.gpt = {.layers = 2, .heads = 2, .width = width, .context = 4, .vocabulary = 11};
  spec.input = {1, spec.gpt.context, 1};
  return spec;
}

models::ModelSpec mlpSpec() {
  models::ModelSpec spec;
  spec.name = "mlp";
  spec.input = {1, 3, 3};
  spec.classes = 4;
  spec.hidden = {5};
  return spec;
}

models::Model<float> initialised(const models::ModelSpec& spec, std::uint64_t seed) {
  models::Model<float> model = models::makeModel<float>(spec);
  model.initialize(seed);
  return model;
}

storage::CheckpointContent checkpointOf(const models::Model<float>& model) {
  storage::CheckpointContent saved;
  saved.step = 5;
  saved.config = "model = test\n";
  saved.parameters = storage::tensorsFromTable(model.parameterTable(), model.parameters());
  return saved;
}

// The name is a C string: g++ 13 takes a reference returned beside a temporary std::string for a
// dangling one (-Wdangling-reference).
const storage::Tensor& named(const std::vector<storage::Tensor>& tensors, const char* name) {
  for (const storage::Tensor& t : tensors)
    if (t.name == name) return t;
  throw std::out_of_range(name);
}

struct TempFile {
  fs::path path = fs::temp_directory_path() /
                  ("ringtrain_weights_" + std::to_string(::getpid()) + ".safetensors");
  ~TempFile() { fs::remove(path); }
};

TEST(ExportedWeights, OnlyTheGptBlocksDenseWeightsAreTransposed) {
  for (const char* name : {"h.0.attn.c_attn.weight", "h.0.attn.c_proj.weight",
                           "h.11.mlp.c_fc.weight", "h.3.mlp.c_proj.weight"})
    EXPECT_TRUE(transposedInWeightsFile(name)) << name;
  for (const char* name : {"h.0.attn.c_attn.bias", "h.0.ln_1.weight", "wte.weight", "wpe.weight",
                           "ln_f.weight", "fc1.weight", "conv1.weight", "mlp.c_fc.weight"})
    EXPECT_FALSE(transposedInWeightsFile(name)) << name;
}

TEST(ExportedWeights, GptFileHasHuggingFaceLayoutAndNoLmHead) {
  const models::Model<float> model = initialised(gptSpec(), 3);
  const storage::CheckpointContent saved = checkpointOf(model);
  const storage::SafetensorsContent file = exportedWeights(saved, "9.9");
  EXPECT_EQ(file.metadata.at("format"), "pt");
  EXPECT_EQ(file.metadata.at("ringtrain_version"), "9.9");
  EXPECT_EQ(file.metadata.at("ringtrain_step"), "5");
  EXPECT_EQ(file.metadata.at("ringtrain_config"), "model = test\n");
  ASSERT_EQ(file.tensors.size(), model.parameterTable().size());
  for (const storage::Tensor& t : file.tensors)
    EXPECT_FALSE(t.name.starts_with("lm_head")) << t.name;
  // c_attn {3C, C} in ringtrain is [C, 3C] in the file: file[i][j] == ringtrain[j][i].
  const storage::Tensor& ours = named(saved.parameters, "h.1.attn.c_attn.weight");
  const storage::Tensor& theirs = named(file.tensors, "h.1.attn.c_attn.weight");
  ASSERT_EQ(ours.shape, (std::vector<std::int64_t>{24, 8}));
  ASSERT_EQ(theirs.shape, (std::vector<std::int64_t>{8, 24}));
  for (std::size_t i = 0; i < 8; ++i)
    for (std::size_t j = 0; j < 24; ++j)
      ASSERT_EQ(theirs.values[i * 24 + j], ours.values[j * 8 + i]) << i << "," << j;
  EXPECT_EQ(named(file.tensors, "h.0.mlp.c_fc.weight").shape, (std::vector<std::int64_t>{8, 32}));
  EXPECT_EQ(named(file.tensors, "h.0.mlp.c_proj.weight").shape, (std::vector<std::int64_t>{32, 8}));
  EXPECT_EQ(named(file.tensors, "wte.weight").values, named(saved.parameters, "wte.weight").values);
}

TEST(ExportedWeights, RoundTripGivesTheSameParameters) {
  for (const models::ModelSpec& spec : {gptSpec(), mlpSpec()}) {
    const models::Model<float> source = initialised(spec, 3);
    models::Model<float> target = initialised(spec, 4);
    ASSERT_NE(std::vector<float>(target.parameters().begin(), target.parameters().end()),
              std::vector<float>(source.parameters().begin(), source.parameters().end()));
    const TempFile file;
    storage::writeSafetensors(file.path, exportedWeights(checkpointOf(source), "1"));
    loadWeightsFile(file.path, target);
    EXPECT_EQ(std::vector<float>(target.parameters().begin(), target.parameters().end()),
              std::vector<float>(source.parameters().begin(), source.parameters().end()))
        << spec.name;
  }
}

std::string loadError(const fs::path& path, models::Model<float>& model) {
  try {
    loadWeightsFile(path, model);
  } catch (const storage::CheckpointError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ExportedWeights, MismatchesAreNamedInTheFilesLayout) {
  const TempFile file;
  storage::SafetensorsContent content =
      exportedWeights(checkpointOf(initialised(gptSpec(), 3)), "1");
  models::Model<float> model = initialised(gptSpec(), 4);
  // The weight in ringtrain's own layout {3C, C} is the wrong shape for the file.
  storage::Tensor& attn = content.tensors[4];
  ASSERT_EQ(attn.name, "h.0.attn.c_attn.weight");
  std::swap(attn.shape[0], attn.shape[1]);
  storage::writeSafetensors(file.path, content);
  EXPECT_EQ(loadError(file.path, model), file.path.string() +
                                             ": parameter h.0.attn.c_attn.weight is 24x8 but the "
                                             "model's is 8x24");
  std::swap(attn.shape[0], attn.shape[1]);
  content.tensors.push_back({"extra", {1}, {0.0f}});
  storage::writeSafetensors(file.path, content);
  EXPECT_EQ(loadError(file.path, model),
            file.path.string() + ": has parameter extra, which the model does not");
  content.tensors.pop_back();
  content.tensors.erase(content.tensors.begin());
  storage::writeSafetensors(file.path, content);
  EXPECT_EQ(loadError(file.path, model), file.path.string() + ": has no parameter wte.weight");
}

}  // namespace
}  // namespace ringtrain::training
