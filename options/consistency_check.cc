#include "options/consistency_check.h"

#include <cstdint>
#include <sstream>

#include "base/fingerprint.h"
#include "collectives/mpi_check.h"

namespace ringtrain::options {
namespace {

std::string serialize(const ConsistencyItems& items) {
  std::string text;
  for (const auto& [key, value] : items)
    text += key + '\t' + value + '\n';
  return text;
}

ConsistencyItems deserialize(const std::string& text) {
  ConsistencyItems items;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const std::size_t tab = line.find('\t');
    items.emplace_back(line.substr(0, tab), tab == std::string::npos ? "" : line.substr(tab + 1));
  }
  return items;
}

}  // namespace

ConsistencyItems itemsFromLines(const std::string& prefix, const std::string& text) {
  ConsistencyItems items;
  std::istringstream in(text);
  std::string line;
  for (int i = 0; std::getline(in, line); ++i) {
    items.emplace_back(prefix + " line " + std::to_string(i + 1), line);
  }
  return items;
}

std::optional<std::string> findDisagreement(MPI_Comm comm, const ConsistencyItems& items) {
  int rank = 0, size = 1;
  RINGTRAIN_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  RINGTRAIN_MPI_CHECK(MPI_Comm_size(comm, &size));
  const std::string mine = serialize(items);
  const std::uint64_t hash = fingerprint(mine.data(), mine.size());
  std::vector<std::uint64_t> hashes(static_cast<std::size_t>(size));
  RINGTRAIN_MPI_CHECK(MPI_Allgather(&hash, 1, MPI_UINT64_T, hashes.data(), 1, MPI_UINT64_T, comm));
  int differing = -1;
  for (int r = 1; r < size && differing < 0; ++r) {
    if (hashes[r] != hashes[0]) differing = r;
  }
  if (differing < 0) return std::nullopt;
  if (rank == differing) {
    const int length = static_cast<int>(mine.size());
    RINGTRAIN_MPI_CHECK(MPI_Send(&length, 1, MPI_INT, 0, 0, comm));
    RINGTRAIN_MPI_CHECK(MPI_Send(mine.data(), length, MPI_CHAR, 0, 1, comm));
  }
  if (rank != 0) return std::nullopt;
  int length = 0;
  RINGTRAIN_MPI_CHECK(MPI_Recv(&length, 1, MPI_INT, differing, 0, comm, MPI_STATUS_IGNORE));
  std::string text(static_cast<std::size_t>(length), '\0');
  RINGTRAIN_MPI_CHECK(
      MPI_Recv(text.data(), length, MPI_CHAR, differing, 1, comm, MPI_STATUS_IGNORE));
  const ConsistencyItems theirs = deserialize(text);
  const std::string who = "rank " + std::to_string(differing);
  for (std::size_t i = 0; i < std::max(items.size(), theirs.size()); ++i) {
    if (i >= items.size()) return who + " has an extra " + theirs[i].first + " " + theirs[i].second;
    if (i >= theirs.size())
      return who + " lacks " + items[i].first + " (rank 0 has " + items[i].second + ")";
    if (items[i] == theirs[i]) continue;
    if (items[i].first != theirs[i].first) {
      return who + " has " + theirs[i].first + " " + theirs[i].second + " where rank 0 has " +
             items[i].first + " " + items[i].second;
    }
    return who + " has " + theirs[i].first + " " + theirs[i].second + " but rank 0 has " +
           items[i].second;
  }
  return who + " disagrees with rank 0 (no differing item found)";
}

}  // namespace ringtrain::options
