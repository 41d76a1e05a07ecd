// `ringtrain eval`: the test-set loss and accuracy of saved weights, without training.
//
//   mpirun -np 2 ringtrain eval --checkpoint checkpoints/ --data data/mnist --json eval.json
//   mpirun -np 2 ringtrain eval --init-from gpt2.safetensors --model gpt2-124m --data data/fortunes
//
// The weights are a checkpoint (a file, or a folder's newest good one) or a safetensors file. The
// model and data are the configuration saved with them (a checkpoint's, or the ringtrain_config
// metadata of a file `ringtrain export` wrote), each `ringtrain train` option on the command line
// overriding its saved value; a file without a saved configuration takes the train options alone
// (or --config FILE). Every rank reads the weights and the data; the ranks evaluate contiguous
// shards of the test set and sum their figures, exactly as the training run's evaluation does
// (training/evaluation.h), so the result is the run's last evaluation at that step. Host
// matrix products only (--device is not used).
#pragma once

#include <vector>

#include "collectives/environment.h"
#include "options/option_table.h"

namespace ringtrain::commands {

// argv[0] is "eval". Rank 0 prints the evaluation line and, with --json, writes the figures.
// Returns 0; a bad option, file or model ends every rank with one line and exit status 2.
int evalCommand(int argc, char** argv, collectives::MpiEnvironment& env);

// Eval's own options (--checkpoint, --init-from, --json), for registerProgramOptions.
std::vector<options::Spec> evalOptionSpecs();

}  // namespace ringtrain::commands
