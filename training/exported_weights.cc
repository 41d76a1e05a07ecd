#include "training/exported_weights.h"

#include <algorithm>
#include <array>
#include <optional>
#include <string>

#include "storage/checkpoint_model.h"
#include "storage/safetensors.h"

namespace ringtrain::training {
namespace {

// The values of a rows x cols matrix (row-major) as the cols x rows matrix.
std::vector<float> transposed(std::span<const float> values, std::size_t rows, std::size_t cols) {
  std::vector<float> out(values.size());
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c)
      out[c * rows + r] = values[r * cols + c];
  return out;
}

// Whether a tensor of this name and shape is {in, out} in the file and {out, in} in the model.
template <class Shape>
bool transposedInFile(std::string_view name, const Shape& shape) {
  return transposedInWeightsFile(name) && shape.size() == 2;
}

}  // namespace

bool transposedInWeightsFile(std::string_view name) {
  static constexpr std::array<std::string_view, 4> kConv1d = {
      ".attn.c_attn.weight", ".attn.c_proj.weight", ".mlp.c_fc.weight", ".mlp.c_proj.weight"};
  return name.starts_with("h.") && std::any_of(kConv1d.begin(), kConv1d.end(),
                                               [&](auto suffix) { return name.ends_with(suffix); });
}

storage::SafetensorsContent exportedWeights(const storage::CheckpointContent& saved,
                                            std::string_view version) {
  storage::SafetensorsContent content;
  content.metadata = {{"format", "pt"},
                      {"ringtrain_version", std::string(version)},
                      {"ringtrain_step", std::to_string(saved.step)},
                      {"ringtrain_config", saved.config}};
  for (const storage::Tensor& parameter : saved.parameters) {
    storage::Tensor& t = content.tensors.emplace_back(parameter);
    if (transposedInFile(t.name, t.shape)) {
      t.values = transposed(t.values, static_cast<std::size_t>(t.shape[0]),
                            static_cast<std::size_t>(t.shape[1]));
      std::swap(t.shape[0], t.shape[1]);
    }
  }
  return content;
}

void loadWeightsFile(const std::filesystem::path& file, models::Model<float>& model) {
  // The header, checked against the file's size and then the model, before any data is read: a
  // file of the wrong model costs its header, not its gigabytes.
  const storage::SafetensorsFile weights(file);
  // The model's table as the file lays it out: checked, and read, in the file's shapes.
  std::vector<models::ParameterEntry> asInFile(model.parameterTable().begin(),
                                               model.parameterTable().end());
  for (models::ParameterEntry& entry : asInFile)
    if (transposedInFile(entry.name, entry.shape)) std::swap(entry.shape[0], entry.shape[1]);
  const std::vector<const storage::SafetensorsEntry*> matched = storage::matchTensorsToTable(
      weights.tensors(), std::span<const models::ParameterEntry>(asInFile), file);
  for (std::size_t i = 0; i < asInFile.size(); ++i) {
    const models::ParameterEntry& entry = asInFile[i];
    const std::span<float> values = model.parameters().subspan(entry.offset, entry.count);
    weights.read(*matched[i], values);  // tensor by tensor, straight into the parameters
    if (!transposedInFile(entry.name, entry.shape)) continue;
    const std::vector<float> back = transposed(values, static_cast<std::size_t>(entry.shape[0]),
                                               static_cast<std::size_t>(entry.shape[1]));
    std::copy(back.begin(), back.end(), values.begin());
  }
}

}  // namespace ringtrain::training
