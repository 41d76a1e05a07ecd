// The memory a rank holds, as the program can account for it, beside the process's peak resident
// set: what `ringtrain train` prints once at the end of a run (rank 0, every rank's figures) and
// writes to --logdir's metrics.jsonl (split "memory"). scripts/bench/memory.sh reads the line.
//
// The parts are the buffers the trainer knows the size of; the peak is the kernel's count of
// every page the process touched (libraries, MPI, the data, the BLAS's packing buffers too), so
// after a step it is at least the parts that live in private memory.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "collectives/communicator.h"
#include "engine/gradient_exchange.h"
#include "models/model.h"
#include "storage/tensorboard_writer.h"
#include "training/optimizer.h"

namespace ringtrain::training {

// Bytes, of one rank.
struct MemoryAccount {
  std::int64_t parameters = 0;            // the flat parameter buffer
  std::int64_t gradients = 0;             // backward's gradients (a tied head's own included)
  std::int64_t averagedGradients = 0;     // the exchange's averages; 0 when averaged in place
  std::int64_t optimizerState = 0;        // Optimizer::state(): what this rank's optimiser holds
  std::int64_t activations = 0;           // what the layers keep for backward, and their scratch
  std::int64_t communicationBuffers = 0;  // GradientExchange::bufferBytes()
  std::int64_t peakResident = 0;          // the process's peak resident set so far; 0: unknown

  // The sum of the parts (the peak left out).
  std::int64_t accounted() const {
    return parameters + gradients + averagedGradients + optimizerState + activations +
           communicationBuffers;
  }
};

// This process's peak resident set size in bytes (getrusage's ru_maxrss); 0 where unknown.
std::int64_t peakResidentBytes();

// This rank's account now. `buffers`: the exchange's host buffers (empty for a device model).
MemoryAccount accountMemory(const models::Model<float>& model, Optimizer& optimizer,
                            const engine::StepBuffers& buffers,
                            const engine::GradientExchange& exchange);

// Collective over `comm`: every rank's account, by rank, on every rank.
std::vector<MemoryAccount> gatherMemory(collectives::Communicator& comm, const MemoryAccount& mine);

// "memory per rank, MiB (the largest of the ranks): parameters 474.7, gradients ..., averaged
// gradients ..., optimiser state ..., activations ..., communication buffers ...; accounted ...;
// peak resident 8838.1 (by rank: 8838.1, 8801.2)". Empty for no ranks.
std::string memoryLine(std::span<const MemoryAccount> perRank);

// One "memory" line at `step` in `log` (metrics.jsonl, and TensorBoard scalars): each part's
// largest over the ranks, and the peak's largest and smallest, in bytes.
void logMemory(storage::TrainingLog& log, std::int64_t step,
               std::span<const MemoryAccount> perRank);

}  // namespace ringtrain::training
