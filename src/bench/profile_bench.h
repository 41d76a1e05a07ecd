// `ringtrain bench`: the data-parallel step of a gradient profile (gradient_profile.h) through
// the real gradient engine, with each layer's computation replaced by a timed stand-in.
//
// Every rank runs, per step: beginStep; a third of --compute-ms for forward; then for each tensor
// in backward order its share of the other two thirds (in proportion to its FLOPs) and
// segmentReady; finishStep. The buckets, overlap, compression and all-reduces are the engine's
// own on a gradient buffer of the profile's size. Rank 0 times the steps after --warmup-steps
// and reports a table on stdout and, with --json, the results (docs/bench.md has the schema).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "collectives/environment.h"
#include "src/bench/bench_config.h"
#include "src/bench/gradient_profile.h"

namespace ringtrain::bench {

// The stand-in's durations for one step.
struct StandInPlan {
  double forwardSeconds = 0;
  std::vector<double> backwardSeconds;  // per tensor, backward order
};
// Forward is a third of computeMs, backward two thirds, shared out in proportion to the tensors'
// FLOPs (evenly when the profile counts none).
StandInPlan planStandIn(const GradientProfile& profile, double computeMs);

// The analytic lower bound on a step with perfect overlap: max(compute, ring all-reduce time)
// where the all-reduce moves 2(n-1)/n of the wire bytes over the link and waits 2(n-1) message
// latencies per bucket. Without a link rate (unshaped) the bound is the computation alone.
struct StepBound {
  double computeSeconds = 0;
  std::optional<double> communicationSeconds;  // nullopt: unshaped with several ranks
  double stepSeconds = 0;
};
StepBound stepBound(double computeMs, int ranks, double wireBytes, int buckets, double linkGbit,
                    double linkLatencyUs);

// Linear interpolation between the closest ranks, as numpy.percentile; q in [0, 100].
double percentile(std::vector<double> values, double q);
// 1.96 times the sample standard deviation (0 for fewer than two values).
double ci95(const std::vector<double>& values);
double mean(const std::vector<double>& values);

// The command, argv without "bench". Returns the exit status; a bad option or profile ends the
// job on every rank with one line.
int benchCommand(int argc, char** argv, collectives::MpiEnvironment& env,
                 const std::filesystem::path& program);

}  // namespace ringtrain::bench
