#include "api/point_to_point.h"

#include <algorithm>
#include <string>

#include "collectives/mpi_check.h"
#include "ringtrain/ringtrain.h"

namespace ringtrain::api {
namespace {

// MPI counts are ints: a message goes in pieces of 1 GiB, which arrive in order (MPI does not
// let messages of one sender, receiver and tag overtake each other).
constexpr std::size_t kPiece = std::size_t{1} << 30;

std::string where(const char* call, int peer, int tag) {
  return std::string("ringtrain::") + call + " (rank " + std::to_string(peer) + ", tag " +
         std::to_string(tag) + ")";
}

std::size_t pieceAt(std::size_t offset, std::size_t bytes) {
  return std::min(kPiece, bytes - offset);
}

}  // namespace

PointToPoint::PointToPoint(MPI_Comm world) {
  RINGTRAIN_MPI_CHECK(MPI_Comm_dup(world, &comm_));
  RINGTRAIN_MPI_CHECK(MPI_Comm_size(comm_, &size_));
  void* limit = nullptr;
  int found = 0;
  RINGTRAIN_MPI_CHECK(MPI_Comm_get_attr(comm_, MPI_TAG_UB, &limit, &found));
  if (found != 0) tagLimit_ = *static_cast<int*>(limit);
}

PointToPoint::~PointToPoint() {
  for (auto& [handle, transfer] : transfers_) {
    for (MPI_Request& request : transfer.requests) {
      if (request == MPI_REQUEST_NULL) continue;
      MPI_Cancel(&request);
      MPI_Request_free(&request);
    }
  }
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

std::int64_t PointToPoint::startSend(const void* data, std::size_t bytes, int destination,
                                     int tag) {
  Transfer send{const_cast<void*>(data), bytes, false, destination, tag, {}, false, {}};
  auto* base = static_cast<unsigned char*>(send.data);
  const std::int64_t handle = add(send);  // checks the rank and tag first
  std::vector<MPI_Request> requests;
  std::size_t offset = 0;
  do {  // an empty message is one empty piece
    const std::size_t piece = pieceAt(offset, bytes);
    requests.emplace_back(MPI_REQUEST_NULL);
    RINGTRAIN_MPI_CHECK(MPI_Isend(base + offset, static_cast<int>(piece), MPI_BYTE, destination,
                                  tag, comm_, &requests.back()));
    offset += piece;
  } while (offset < bytes);
  std::lock_guard lock(mutex_);
  transfers_.at(handle).requests = std::move(requests);
  return handle;
}

std::int64_t PointToPoint::startReceive(void* data, std::size_t bytes, int source, int tag) {
  return add(Transfer{data, bytes, true, source, tag, {}, false, {}});
}

std::int64_t PointToPoint::add(Transfer transfer) {
  if (transfer.peer < 0 || transfer.peer >= size_ || transfer.tag < 0 || transfer.tag > tagLimit_) {
    throw InvalidArgument(
        where(transfer.receive ? "startReceive" : "startSend", transfer.peer, transfer.tag) +
        ": the rank must be in [0, " + std::to_string(size_) + ") and the tag in [0, " +
        std::to_string(tagLimit_) + "]");
  }
  std::lock_guard lock(mutex_);
  const std::int64_t handle = next_++;
  transfers_.emplace(handle, std::move(transfer));
  return handle;
}

void PointToPoint::receive(Transfer& transfer) {
  auto* base = static_cast<unsigned char*>(transfer.data);
  std::size_t offset = 0;
  do {
    MPI_Message message = MPI_MESSAGE_NULL;
    MPI_Status status;
    RINGTRAIN_MPI_CHECK(MPI_Mprobe(transfer.peer, transfer.tag, comm_, &message, &status));
    int count = 0;
    RINGTRAIN_MPI_CHECK(MPI_Get_count(&status, MPI_BYTE, &count));
    const std::size_t piece = pieceAt(offset, transfer.bytes);
    if (static_cast<std::size_t>(count) != piece) {
      std::vector<unsigned char> discarded(static_cast<std::size_t>(count));
      RINGTRAIN_MPI_CHECK(MPI_Mrecv(discarded.data(), count, MPI_BYTE, &message, &status));
      transfer.error = where("waitTransfer", transfer.peer, transfer.tag) + ": a message of " +
                       std::to_string(count) + " bytes where " + std::to_string(piece) +
                       " were expected";
      break;
    }
    RINGTRAIN_MPI_CHECK(MPI_Mrecv(base + offset, count, MPI_BYTE, &message, &status));
    offset += piece;
  } while (offset < transfer.bytes);
  transfer.received = true;
}

std::vector<PointToPoint::Transfer*> PointToPoint::unreceived(std::int64_t handle) {
  std::lock_guard lock(mutex_);
  const Transfer& mine = transfers_.at(handle);
  std::vector<Transfer*> found;
  for (auto it = transfers_.begin(); it != transfers_.end() && it->first <= handle; ++it) {
    Transfer& t = it->second;
    if (t.receive && !t.received && t.peer == mine.peer && t.tag == mine.tag) found.push_back(&t);
  }
  return found;
}

std::string PointToPoint::finish(std::int64_t handle) {
  std::lock_guard lock(mutex_);
  auto it = transfers_.find(handle);
  std::string error = std::move(it->second.error);
  transfers_.erase(it);
  return error;
}

void PointToPoint::wait(std::int64_t handle) {
  Transfer* mine = nullptr;
  {
    std::lock_guard lock(mutex_);
    auto it = transfers_.find(handle);
    if (it == transfers_.end())
      throw InvalidArgument("ringtrain::waitTransfer: unknown handle " + std::to_string(handle));
    mine = &it->second;
  }
  std::string error;
  if (mine->receive) {
    // Receives are taken, and forgotten, under receiving_ alone: the pointers stay valid.
    const std::lock_guard receiving(receiving_);
    for (Transfer* transfer : unreceived(handle))
      receive(*transfer);
    error = finish(handle);
  } else {
    RINGTRAIN_MPI_CHECK(MPI_Waitall(static_cast<int>(mine->requests.size()), mine->requests.data(),
                                    MPI_STATUSES_IGNORE));
    error = finish(handle);
  }
  if (!error.empty()) throw Error(error);
}

}  // namespace ringtrain::api
