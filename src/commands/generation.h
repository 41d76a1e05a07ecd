// Text from a trained GPT: `ringtrain generate --checkpoint FILE --prompt TEXT`.
//
// The model is rebuilt from the checkpoint alone: its sizes from the tensors' shapes and the saved
// configuration (the heads), its weights by name. Each new token is drawn from the softmax of the
// last position's logits over the last `context` tokens, scaled by 1/temperature and cut to the
// top k; temperature 0 takes the most likely token. A text ends at <|endoftext|> or after the
// number of tokens asked for.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>

#include "models/initialization.h"
#include "models/model.h"
#include "models/model_factory.h"
#include "storage/checkpoint.h"
#include "training/config.h"

namespace ringtrain::commands {

// The GPT sizes a checkpoint holds; throws std::runtime_error naming the file when it holds no
// GPT (no wte.weight, no heads in its configuration).
models::GptShape gptShapeOf(const storage::CheckpointContent& saved,
                            const std::filesystem::path& file);

// A token drawn from `logits` (see above); `generator` makes the draw repeatable.
std::int32_t sampleToken(std::span<const float> logits, double temperature, int topK,
                         models::SplitMix64& generator);

// Runs `ringtrain generate` (argv[1] is "generate"): prints each sample, prompt included.
// Returns the exit status: 0, or 2 with one line on stderr for a bad option or file.
int generateCommand(int argc, char** argv);

}  // namespace ringtrain::commands
