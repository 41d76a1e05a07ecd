#include "collectives/recursive_doubling.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "collectives/communicator.h"
#include "collectives/mpi_check.h"
#include "collectives/reduce_kernels.h"

namespace ringtrain::collectives {
namespace {

// Open MPI's shared-memory transport sends up to 4040 payload bytes eagerly (4096 less its own
// 56-byte header); a piece never exceeds that.
constexpr std::size_t kPieceBytes = 4040;

std::size_t pieceCount(std::size_t payloadBytes) {
  return std::max<std::size_t>(1, (payloadBytes + kPieceBytes - 1) / kPieceBytes);
}

int largestPowerOfTwoAtMost(int n) {
  int p = 1;
  while (p * 2 <= n)
    p *= 2;
  return p;
}

// Tag layout: (token << 1) | morePiecesFollow.
int makeTag(std::uint64_t token, bool more) {
  return static_cast<int>((token << 1) | (more ? 1 : 0));
}
std::uint64_t tokenOf(int tag) {
  return static_cast<std::uint64_t>(tag) >> 1;
}
bool moreFollow(int tag) {
  return (tag & 1) != 0;
}

}  // namespace

RecursiveDoubling::RecursiveDoubling(MPI_Comm comm, std::size_t maxPayloadBytes, WaitMode waitMode)
    : comm_(comm), maxPayloadBytes_(maxPayloadBytes), waitMode_(waitMode) {
  RINGTRAIN_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  RINGTRAIN_MPI_CHECK(MPI_Comm_size(comm_, &size_));
  // MPI guarantees tags up to 32767; Open MPI allows 2^31 - 1. One bit is the "more" flag.
  void* value = nullptr;
  int found = 0;
  RINGTRAIN_MPI_CHECK(MPI_Comm_get_attr(comm_, MPI_TAG_UB, &value, &found));
  const long tagUpperBound = found ? *static_cast<int*>(value) : 32767;
  int bits = 0;
  while (bits < 62 && (2L << bits) - 1 <= tagUpperBound)
    ++bits;  // tags 0 .. 2^bits - 1 fit
  tokenBits_ = bits - 1;
  const std::size_t room = pieceCount(maxPayloadBytes_) * kPieceBytes;
  mine_.resize(room);
  incoming_.resize(room);
}

void RecursiveDoubling::agree(const CallSignature& signature) {
  payloadBytes_ = 0;
  exchange(signature, DataType::kFloat32, ReduceOp::kSum);
}

void RecursiveDoubling::allreduce(const CallSignature& signature, const void* send, void* recv,
                                  std::size_t count, DataType type, ReduceOp op) {
  payloadBytes_ = count * sizeOf(type);
  if (payloadBytes_ > maxPayloadBytes_) {
    throw std::logic_error("recursive doubling: " + std::to_string(payloadBytes_) +
                           " bytes exceed its payload limit of " +
                           std::to_string(maxPayloadBytes_));
  }
  if (payloadBytes_ > 0) std::memcpy(mine_.data(), send, payloadBytes_);
  exchange(signature, type, op);
  if (payloadBytes_ > 0) std::memcpy(recv, mine_.data(), payloadBytes_);
  if (op == ReduceOp::kAverage) divideArray(type, recv, count, size_);
}

void RecursiveDoubling::exchange(const CallSignature& signature, DataType type, ReduceOp op) {
  // Tokens 1 .. 2^tokenBits - 1 (the hash's low bits; a mask, not a division, per call); 0 is
  // kDisagreement.
  const std::uint64_t tokenMask = (std::uint64_t{1} << tokenBits_) - 1;
  token_ = agreementToken(signature) & tokenMask;
  if (token_ == kDisagreement) token_ = 1;
  const int p = largestPowerOfTwoAtMost(size_);
  const int folded = size_ - p;  // ranks 0 .. 2*folded-1 pair up: even ones sit the rounds out

  int virtualRank = -1;
  if (rank_ < 2 * folded) {
    if (rank_ % 2 == 0) {
      // Hand this rank's contribution to its odd neighbour; later take the final result back.
      postReceives(rank_ + 1);
      postSends(rank_ + 1);
      token_ = completeReceives(rank_ + 1);
      if (token_ != kDisagreement && payloadBytes_ > 0) {
        std::memcpy(mine_.data(), incoming_.data(), payloadBytes_);
      }
    } else {
      swapWith(rank_ - 1, /*peerIsLower=*/true, /*send=*/false, type, op);
      virtualRank = rank_ / 2;
    }
  } else {
    virtualRank = rank_ - folded;
  }

  if (virtualRank >= 0) {
    for (int mask = 1; mask < p; mask <<= 1) {
      const int partnerVirtual = virtualRank ^ mask;
      const int partner =
          partnerVirtual < folded ? 2 * partnerVirtual + 1 : partnerVirtual + folded;
      swapWith(partner, partnerVirtual < virtualRank, /*send=*/true, type, op);
    }
    if (rank_ < 2 * folded) {
      postSends(rank_ - 1);
      waitForAll(static_cast<int>(sends_.size()), sends_.data(), waitMode_);
    }
  }

  if (token_ == kDisagreement) throwDisagreement(signature, comm_);
}

void RecursiveDoubling::postReceives(int peer) {
  receives_.clear();
  for (std::size_t piece = 0; piece < pieceCount(payloadBytes_); ++piece) {
    receives_.emplace_back();
    RINGTRAIN_MPI_CHECK(MPI_Irecv(incoming_.data() + piece * kPieceBytes,
                                  static_cast<int>(kPieceBytes), MPI_BYTE, peer, MPI_ANY_TAG, comm_,
                                  &receives_.back()));
  }
}

void RecursiveDoubling::postSends(int peer) {
  sends_.clear();
  const std::size_t pieces = pieceCount(payloadBytes_);
  for (std::size_t piece = 0; piece < pieces; ++piece) {
    const std::size_t offset = piece * kPieceBytes;
    const std::size_t length =
        std::min(kPieceBytes, payloadBytes_ - std::min(payloadBytes_, offset));
    sends_.emplace_back();
    RINGTRAIN_MPI_CHECK(MPI_Isend(mine_.data() + offset, static_cast<int>(length), MPI_BYTE, peer,
                                  makeTag(token_, piece + 1 < pieces), comm_, &sends_.back()));
  }
}

std::uint64_t RecursiveDoubling::completeReceives(int peer, const MPI_Status* firstPiece) {
  std::uint64_t theirToken = kDisagreement;
  receivedBytes_ = 0;
  for (std::size_t piece = 0;; ++piece) {
    MPI_Status status;
    if (piece == 0 && firstPiece != nullptr) {
      status = *firstPiece;
    } else {
      receivePiece(peer, piece, &status);
    }
    int length = 0;
    RINGTRAIN_MPI_CHECK(MPI_Get_count(&status, MPI_BYTE, &length));
    receivedBytes_ += static_cast<std::size_t>(length);
    if (piece == 0) theirToken = tokenOf(status.MPI_TAG);
    if (moreFollow(status.MPI_TAG)) continue;
    cancelSurplusReceives(piece + 1);
    break;
  }
  if (!sends_.empty()) {  // none after MPI_Sendrecv: an MPI call saved on the small path
    waitForAll(static_cast<int>(sends_.size()), sends_.data(), waitMode_);
    sends_.clear();
  }
  return theirToken;
}

void RecursiveDoubling::receivePiece(int peer, std::size_t piece, MPI_Status* status) {
  if (piece >= receives_.size()) {
    // The partner sends more pieces than this rank expected (it disagrees): receive them too.
    if ((piece + 1) * kPieceBytes > incoming_.size()) {
      abortJob("collective agreement: rank " + std::to_string(peer) + " sends more than " +
               std::to_string(maxPayloadBytes_) +
               " payload bytes, this rank's limit (do all ranks use the same ring options?)");
    }
    receives_.resize(piece + 1, MPI_REQUEST_NULL);
    RINGTRAIN_MPI_CHECK(MPI_Irecv(incoming_.data() + piece * kPieceBytes,
                                  static_cast<int>(kPieceBytes), MPI_BYTE, peer, MPI_ANY_TAG, comm_,
                                  &receives_[piece]));
  }
  waitFor(&receives_[piece], status, waitMode_);
}

void RecursiveDoubling::cancelSurplusReceives(std::size_t from) {
  // Receives posted for pieces that will not come (the partner's payload is shorter, so it
  // disagrees): nothing else from the partner reaches this rank before the disagreement has
  // been reported to every rank, so they can be cancelled safely.
  for (std::size_t surplus = from; surplus < receives_.size(); ++surplus) {
    RINGTRAIN_MPI_CHECK(MPI_Cancel(&receives_[surplus]));
    MPI_Status cancelled;
    RINGTRAIN_MPI_CHECK(MPI_Wait(&receives_[surplus], &cancelled));
    int wasCancelled = 0;
    RINGTRAIN_MPI_CHECK(MPI_Test_cancelled(&cancelled, &wasCancelled));
    if (!wasCancelled) abortJob("collective agreement: a surplus receive matched a message");
  }
}

void RecursiveDoubling::swapWith(int peer, bool peerIsLower, bool send, DataType type,
                                 ReduceOp op) {
  std::uint64_t theirToken = kDisagreement;
  if (send && waitMode_ == WaitMode::kSpin && pieceCount(payloadBytes_) == 1) {
    // One piece each way: a single call, where the MPI library's own all-reduce makes one too
    // (posting, sending and waiting apart cost several).
    receives_.clear();
    MPI_Status status;
    RINGTRAIN_MPI_CHECK(MPI_Sendrecv(mine_.data(), static_cast<int>(payloadBytes_), MPI_BYTE, peer,
                                     makeTag(token_, false), incoming_.data(),
                                     static_cast<int>(kPieceBytes), MPI_BYTE, peer, MPI_ANY_TAG,
                                     comm_, &status));
    theirToken = completeReceives(peer, &status);
  } else {
    postReceives(peer);
    if (send) postSends(peer);
    theirToken = completeReceives(peer);
  }
  token_ = mergeTokens(token_, theirToken);
  // Once the tokens disagree the data no longer matters; the rounds still run to the end so that
  // every rank learns of the disagreement. While they agree, the lengths are equal.
  if (token_ == kDisagreement || payloadBytes_ == 0) return;
  if (receivedBytes_ != payloadBytes_) {
    abortJob("collective agreement: rank " + std::to_string(peer) + " sent " +
             std::to_string(receivedBytes_) + " bytes for a call it agrees on, expected " +
             std::to_string(payloadBytes_));
  }
  const std::size_t count = payloadBytes_ / sizeOf(type);
  const void* lower = peerIsLower ? static_cast<const void*>(incoming_.data()) : mine_.data();
  const void* higher = peerIsLower ? static_cast<const void*>(mine_.data()) : incoming_.data();
  reduceArrays(type, op, lower, higher, mine_.data(), count);
}

void throwDisagreement(const CallSignature& mine, MPI_Comm comm) {
  int size = 0;
  RINGTRAIN_MPI_CHECK(MPI_Comm_size(comm, &size));
  std::vector<CallSignature> all(static_cast<std::size_t>(size));
  RINGTRAIN_MPI_CHECK(MPI_Allgather(&mine, sizeof(CallSignature), MPI_BYTE, all.data(),
                                    sizeof(CallSignature), MPI_BYTE, comm));
  throw CollectiveMismatchError(disagreementMessage(all));
}

void agreeUnlessRefused(RecursiveDoubling& agreement, CallSignature signature,
                        const std::string& problem) {
  if (!problem.empty()) signature.dataType = -1;
  try {
    agreement.agree(signature);
  } catch (const CollectiveMismatchError&) {
    if (problem.empty()) throw;
  }
  if (!problem.empty()) throw std::invalid_argument(problem);
}

}  // namespace ringtrain::collectives
