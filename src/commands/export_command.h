// `ringtrain export --format safetensors CHECKPOINT OUT`: a checkpoint's weights as a file other
// tools read (training/exported_weights.h says what the file holds).
#pragma once

#include <string_view>
#include <vector>

#include "options/option_table.h"

namespace ringtrain::commands {

// Runs `ringtrain export` (argv[1] is "export"). Returns the exit status: 0, or 2 with one line
// on stderr for a bad option or file.
int exportCommand(int argc, char** argv, std::string_view version);

// Export's options, for registerProgramOptions.
std::vector<options::Spec> exportOptionSpecs();

}  // namespace ringtrain::commands
