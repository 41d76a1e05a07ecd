// A model's weights as a safetensors file (storage/safetensors.h) other tools read:
// `ringtrain export --format safetensors CHECKPOINT OUT` writes one, `ringtrain train --init-from
// FILE` starts from one.
//
// The file holds the parameters under ringtrain's names (the parameter table's), float32, and in
// ringtrain's layout except for the GPT blocks' dense weights, which are transposed to Hugging
// Face GPT-2's Conv1D layout {in, out} (ringtrain keeps them {out, in}, as torch.nn.Linear does):
// the file then loads into GPT2Model's state dict as it is. The GPT's lm_head has no tensor of its
// own (it reads wte.weight), so the file has none either, as Hugging Face's GPT-2 files. The
// optimiser's state is not exported.
#pragma once

#include <filesystem>
#include <string_view>
#include <vector>

#include "models/model.h"
#include "storage/checkpoint.h"
#include "storage/safetensors.h"

namespace ringtrain::training {

// Whether the file holds the parameter `name` transposed: the GPT blocks' h.<l>.attn.c_attn,
// attn.c_proj, mlp.c_fc and mlp.c_proj weights.
bool transposedInWeightsFile(std::string_view name);

// The checkpoint's parameters as the file holds them, with metadata: "format" "pt" (what Hugging
// Face's loaders ask for), ringtrain's version, the step and the saved configuration.
storage::SafetensorsContent exportedWeights(const storage::CheckpointContent& saved,
                                            std::string_view version);

// Reads `file` into the model's parameters. Throws storage::CheckpointError, one line naming the
// file, for a damaged file and for the first tensor that does not fit the model (missing, of
// another shape as the file holds it, one the model does not have, another dtype); the
// parameters may then be partly overwritten.
void loadWeightsFile(const std::filesystem::path& file, models::Model<float>& model);

}  // namespace ringtrain::training
