// startSend / startReceive / waitTransfer of ringtrain.h: MPI's point to point on a duplicate of
// the job's world of their own, so that no message meets the collectives'. A send is posted at
// once (MPI_Isend). A receive takes its message when waited for (MPI_Mprobe, then MPI_Mrecv), so
// that a message of another length is an Error rather than MPI's truncation; the earlier receives
// from the same rank under the same tag take theirs first, which keeps MPI's order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <mpi.h>

namespace ringtrain::api {

class PointToPoint {
 public:
  explicit PointToPoint(MPI_Comm world);  // collective over world: duplicates it
  ~PointToPoint();
  PointToPoint(const PointToPoint&) = delete;
  PointToPoint& operator=(const PointToPoint&) = delete;

  // The transfer's handle; InvalidArgument for a peer or tag out of range.
  std::int64_t startSend(const void* data, std::size_t bytes, int destination, int tag);
  std::int64_t startReceive(void* data, std::size_t bytes, int source, int tag);
  // Returns once the transfer is done; Error for a message of another size. Spends the handle.
  void wait(std::int64_t handle);

 private:
  struct Transfer {
    void* data = nullptr;
    std::size_t bytes = 0;
    bool receive = false;
    int peer = 0;
    int tag = 0;
    std::vector<MPI_Request> requests;  // a send's, one per piece of at most kPiece bytes
    bool received = false;              // a receive that a later one's wait completed
    std::string error;                  // ... and what went wrong there
  };
  std::int64_t add(Transfer transfer);
  // Under receiving_: the receives up to `handle` from its rank under its tag not yet received,
  // in order; receive() takes one's message; finish() forgets a transfer, returning its error.
  std::vector<Transfer*> unreceived(std::int64_t handle);
  void receive(Transfer& transfer);
  std::string finish(std::int64_t handle);

  MPI_Comm comm_ = MPI_COMM_NULL;
  int size_ = 0;
  int tagLimit_ = 32767;
  std::mutex mutex_;      // transfers_ and next_
  std::mutex receiving_;  // one receive at a time, in order
  std::int64_t next_ = 1;
  std::map<std::int64_t, Transfer> transfers_;
};

}  // namespace ringtrain::api
