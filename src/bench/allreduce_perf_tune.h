// allreduce_perf --autotune: the tuned backend's table, searched by collectives::AllreduceTuner
// with this program's harness (every call checked as the tables' are), printed as it goes and
// written to --tune-out by rank 0.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>

#include "src/bench/allreduce_perf_harness.h"

namespace ringtrain::allreduce_perf {

// Times every algorithm at every size of the sweep (the case's type and reduction), has rank 0
// write the table to --tune-out, and adds the times and the table to `json`. Returns the wrong
// values the checked calls found, summed over the ranks.
std::uint64_t tune(const Bench& bench, const Case& c, nlohmann::json& json, bool root);

}  // namespace ringtrain::allreduce_perf
