// Start-up check that every rank runs the same configuration and model layout.
//
// Ranks that disagree on a hyper-parameter, the model or the bucket plan would issue different
// collectives and wait for each other for ever (or silently train different models). Each rank
// hashes its list of (key, value) items; one all-gather compares the hashes; on a difference the
// first rank that differs from rank 0 sends its list to rank 0, which names the first differing
// item: "rank 3 has --hidden 512,256 but rank 0 has 512,512".
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <mpi.h>

namespace ringtrain::options {

using ConsistencyItems = std::vector<std::pair<std::string, std::string>>;

// Collective over `comm`. Returns the message on rank 0 when ranks differ, nullopt otherwise and
// on the other ranks (pass the result to exitEverywhereOnError).
std::optional<std::string> findDisagreement(MPI_Comm comm, const ConsistencyItems& items);

// Text lines as items: ("<prefix> line <i>", line).
ConsistencyItems itemsFromLines(const std::string& prefix, const std::string& text);

}  // namespace ringtrain::options
