// Refusing a model the machine cannot hold, before it is allocated.
//
// Without this check `--hidden 100000,100000` ends in std::bad_alloc (or the kernel's OOM killer)
// with nothing naming the option that asked for it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "base/physical_memory.h"
#include "models/model_factory.h"
#include "training/config.h"

namespace ringtrain::training {

// Bytes one rank keeps per parameter: the parameters, the gradients, the averaged gradients and
// the optimiser's state (SGD's momentum; Adam's two moments), float32 each.
std::uint64_t bytesPerParameter(const TrainConfig& config);

// The model's options with what the model is sized by: "--model mlp --hidden 512,512" or
// "--model cnn on 1x28x28 samples".
std::string modelOptions(const TrainConfig& config, const models::ModelSpec& spec);

// One line naming the model's options, the bytes its `ranksOnNode` ranks need and the machine's
// `physicalBytes`, when they do not fit; nullopt when they do or the memory is unknown (0).
std::optional<std::string> modelMemoryProblem(const TrainConfig& config,
                                              const models::ModelSpec& spec, int ranksOnNode,
                                              std::uint64_t physicalBytes);

// makeModel<float>(spec), with std::bad_alloc turned into an error naming the model's options and
// its size (a per-process limit, ulimit -v, may refuse what physical memory would hold).
models::Model<float> allocateModel(const TrainConfig& config, const models::ModelSpec& spec);

}  // namespace ringtrain::training
