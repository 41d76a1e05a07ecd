// RecursiveDoubling: the ranks' agreement on a collective's arguments, and small all-reduces,
// in the same log2(n) exchanges.
//
// In every round a rank sends its partner its payload (possibly empty) and merges what it gets
// back. The agreement token (see agreementToken in call_signature.h, here cut to the bits an MPI
// tag holds) travels in the messages' tag, so a message is exactly as long as its payload:
// adding a header would push payloads just below a transport threshold over it (Open MPI's
// shared-memory transport gets slower past 256 bytes, and much slower past 4040, where the
// rendezvous protocol starts). Payloads travel as pieces of at most 4040 bytes, so they stay
// eager; a flag in the tag says whether another piece follows, so the receiver always knows how
// much to receive, whatever the partner passed.
//
// After log2(n) rounds every rank holds the common token or kDisagreement, so all of them reach
// the same verdict: they go on, or every one throws the same CollectiveMismatchError (built from
// one all-gather of the full signatures). No rank can hang or overrun a buffer on a mismatch:
// the rounds depend only on the number of ranks, receives take at most a piece, and no rank sends
// more than maxPayloadBytes. Receiving with MPI_ANY_TAG is safe because nothing else from the
// partner can be in flight on this communicator then: every message of the previous collective
// has been received before it returned, and the next cannot start before this agreement ends.
//
// A small all-reduce rides along as the payload, so checking it costs nothing extra. It is
// reduced only while the tokens agree, always as op(lower ranks' data, higher ranks' data), so
// both partners of a round compute the same bits and every rank ends with the same result.
// Non-power-of-two sizes fold the first 2*(n - p) ranks pairwise into p = 2^floor(log2 n).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <mpi.h>

#include "collectives/aligned_buffer.h"
#include "collectives/call_signature.h"
#include "collectives/request_wait.h"

namespace ringtrain::collectives {

class RecursiveDoubling {
 public:
  RecursiveDoubling(MPI_Comm comm, std::size_t maxPayloadBytes, WaitMode waitMode);

  // Checks that every rank passes the same signature; throws CollectiveMismatchError otherwise.
  void agree(const CallSignature& signature);
  // The same, and all-reduces `count` elements of `send` into `recv` (which may be `send`).
  // count * sizeOf(type) must be at most maxPayloadBytes.
  void allreduce(const CallSignature& signature, const void* send, void* recv, std::size_t count,
                 DataType type, ReduceOp op);

 private:
  void exchange(const CallSignature& signature, DataType type, ReduceOp op);
  // Posts receives for as many pieces as this rank's own payload has, before sending, so that
  // in the usual (agreeing) case arriving pieces match at once instead of queueing.
  void postReceives(int peer);
  void postSends(int peer);
  // Completes the partner's pieces (posting or cancelling receives if its payload differs from
  // this rank's) and returns the partner's token. `firstPiece`: piece 0 has been received
  // already (by MPI_Sendrecv), with this status.
  std::uint64_t completeReceives(int peer, const MPI_Status* firstPiece = nullptr);
  void receivePiece(int peer, std::size_t piece, MPI_Status* status);
  void cancelSurplusReceives(std::size_t from);
  void swapWith(int peer, bool peerIsLower, bool send, DataType type, ReduceOp op);

  MPI_Comm comm_;
  int rank_ = 0;
  int size_ = 1;
  int tokenBits_ = 14;
  std::size_t maxPayloadBytes_;
  WaitMode waitMode_;
  std::uint64_t token_ = kDisagreement;  // this rank's view, cut to tokenBits_
  std::size_t payloadBytes_ = 0;
  std::size_t receivedBytes_ = 0;
  AlignedBuffer mine_;      // this rank's partial result
  AlignedBuffer incoming_;  // the partner's
  std::vector<MPI_Request> sends_;
  std::vector<MPI_Request> receives_;
};

// agreement.agree(signature) for a call this rank already knows it cannot make (`problem` not
// empty, e.g. a host pointer given to a backend of device buffers): it still takes part, with a
// signature no valid call has (data type -1), so that the other ranks throw
// CollectiveMismatchError instead of waiting for it; then it throws std::invalid_argument(problem).
void agreeUnlessRefused(RecursiveDoubling& agreement, CallSignature signature,
                        const std::string& problem);

// Once the ranks of `comm` know they disagree: gathers every rank's signature (collective) and
// throws CollectiveMismatchError naming rank 0's call and the first that differs.
[[noreturn]] void throwDisagreement(const CallSignature& mine, MPI_Comm comm);

}  // namespace ringtrain::collectives
