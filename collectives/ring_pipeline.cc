#include "collectives/ring_pipeline.h"

#include <algorithm>

#include "collectives/mpi_check.h"
#include "collectives/reduce_kernels.h"

namespace ringtrain::collectives {

std::size_t RingLayout::segmentBegin(int segment) const {
  return std::min(count, static_cast<std::size_t>(segment) * stride);
}

std::size_t RingLayout::segmentLength(int segment) const {
  return std::min(count, static_cast<std::size_t>(segment + 1) * stride) - segmentBegin(segment);
}

std::size_t RingLayout::chunkCount(int segment) const {
  return (segmentLength(segment) + chunkElements - 1) / chunkElements;
}

RingPipeline::RingPipeline(MPI_Comm comm, std::size_t chunkBytes, int depth, WaitMode waitMode)
    : comm_(comm),
      chunkBytes_(std::max<std::size_t>(chunkBytes, AlignedBuffer::kAlignment)),
      depth_(std::max(depth, 1)),
      waitMode_(waitMode) {
  RINGTRAIN_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  RINGTRAIN_MPI_CHECK(MPI_Comm_size(comm_, &size_));
  // At least one huge page, so that the landing slots are backed by one (see AlignedBuffer).
  scratch_.resize(
      std::max(static_cast<std::size_t>(depth_) * chunkBytes_, AlignedBuffer::kHugePage));
}

std::size_t RingPipeline::chunkElements(std::size_t elementSize) const {
  const std::size_t lineElements = AlignedBuffer::kAlignment / elementSize;
  return std::max(lineElements, chunkBytes_ / elementSize / lineElements * lineElements);
}

// The receives of a pass form one sequence over (step, chunk). They are posted in that order, at
// most depth_ ahead of the one being processed, and processed in that order; a chunk to be reduced
// lands in scratch slot (its index in the sequence) % depth_, which is free again by the time it
// is reused because the chunk that used it `depth_` receives earlier has been processed. Chunks
// to be stored land directly in `out` (in place: in scratch, then streamed into `out`). Each
// processed chunk is sent on at the next step right away, so step s+1 overlaps step s chunk by
// chunk instead of waiting for the whole segment. Tags are 1 + step: within a step, MPI's
// non-overtaking rule keeps chunks in order.
void RingPipeline::run(const RingPass& pass) {
  const int n = size_;
  if (pass.steps <= 0 || n == 1) return;
  const int right = (rank_ + 1) % n;
  const int left = (rank_ - 1 + n) % n;
  const std::size_t elementSize = sizeOf(pass.type);
  const std::size_t chunk = pass.layout.chunkElements;
  auto segmentAt = [&](int step, int back) {
    return ((pass.firstSegment - step - back) % n + n) % n;
  };
  auto chunkLength = [&](int segment, std::size_t c) {
    return std::min(chunk, pass.layout.segmentLength(segment) - c * chunk);
  };
  // A chunk of `out` that was sent on is overwritten later by the final value of the same chunk
  // (the all-gather). By then the send has been delivered (the final value depends on it), but
  // MPI forbids writing a buffer whose send is still pending, so the receive first retires it.
  const std::size_t chunksPerSegment = (pass.layout.stride + chunk - 1) / chunk;
  lastSendFromOut_.assign(static_cast<std::size_t>(n) * chunksPerSegment, -1);
  auto sendSlot = [&](int segment, std::size_t c) -> int& {
    return lastSendFromOut_[static_cast<std::size_t>(segment) * chunksPerSegment + c];
  };
  auto send = [&](const std::byte* data, std::size_t elements, int step, int segment,
                  std::size_t c) {
    if (data >= pass.out && data < pass.out + pass.layout.count * elementSize) {
      sendSlot(segment, c) = static_cast<int>(sends_.size());
    }
    sends_.emplace_back();
    RINGTRAIN_MPI_CHECK(MPI_Isend(data, static_cast<int>(elements * elementSize), MPI_BYTE, right,
                                  1 + step, comm_, &sends_.back()));
  };

  sends_.clear();
  receives_.assign(static_cast<std::size_t>(depth_), MPI_REQUEST_NULL);

  // Step 0 sends this rank's own segment, all chunks at once.
  const int firstSent = segmentAt(0, 0);
  for (std::size_t c = 0; c < pass.layout.chunkCount(firstSent); ++c) {
    send(pass.firstSend + c * chunk * elementSize, chunkLength(firstSent, c), 0, firstSent, c);
  }

  // Cursors over the receive sequence: `post` runs up to depth_ ahead of `take`.
  struct Cursor {
    int step = 0;
    std::size_t chunk = 0;
    std::size_t index = 0;  // position in the whole sequence
  };
  auto advance = [&](Cursor& cursor) {
    ++cursor.index;
    ++cursor.chunk;
    while (cursor.step < pass.steps &&
           cursor.chunk >= pass.layout.chunkCount(segmentAt(cursor.step, 1))) {
      ++cursor.step;
      cursor.chunk = 0;
    }
  };
  auto normalise = [&](Cursor& cursor) {  // skip steps whose segment is empty
    while (cursor.step < pass.steps && pass.layout.chunkCount(segmentAt(cursor.step, 1)) == 0) {
      ++cursor.step;
    }
  };
  // In place, a stored chunk lands in scratch too and is then streamed into `out`: received
  // directly, the copy would write lines of `out` that the right neighbour read at step 0.
  const bool inPlace = pass.own == pass.out;
  auto landsInScratch = [&](int step) { return step < pass.reduceSteps || inPlace; };
  auto landing = [&](const Cursor& cursor) {
    const int segment = segmentAt(cursor.step, 1);
    if (landsInScratch(cursor.step)) {
      return scratch_.data() + (cursor.index % depth_) * chunkBytes_;
    }
    return pass.out + (pass.layout.segmentBegin(segment) + cursor.chunk * chunk) * elementSize;
  };

  Cursor post;
  Cursor take;
  normalise(post);
  normalise(take);
  auto postReceives = [&] {
    while (post.step < pass.steps && post.index < take.index + depth_) {
      const int segment = segmentAt(post.step, 1);
      if (post.step >= pass.reduceSteps && sendSlot(segment, post.chunk) >= 0) {
        waitFor(&sends_[static_cast<std::size_t>(sendSlot(segment, post.chunk))], MPI_STATUS_IGNORE,
                waitMode_);
      }
      MPI_Request& request = receives_[post.index % depth_];
      RINGTRAIN_MPI_CHECK(
          MPI_Irecv(landing(post), static_cast<int>(chunkLength(segment, post.chunk) * elementSize),
                    MPI_BYTE, left, 1 + post.step, comm_, &request));
      advance(post);
    }
  };

  postReceives();
  while (take.step < pass.steps) {
    const int segment = segmentAt(take.step, 1);
    const std::size_t elements = chunkLength(segment, take.chunk);
    const std::size_t offset =
        (pass.layout.segmentBegin(segment) + take.chunk * chunk) * elementSize;
    std::byte* arrived = landing(take);
    waitFor(&receives_[take.index % depth_], MPI_STATUS_IGNORE, waitMode_);
    if (take.step < pass.reduceSteps) {
      const bool lastReduce = take.step == pass.reduceSteps - 1;
      // Streaming stores: the peer reads this chunk next, and read it last call too.
      reduceArrays(pass.type, pass.op, arrived, pass.own + offset, pass.out + offset, elements,
                   lastReduce ? pass.divisor : 1, StoreMode::kStreaming);
    }
    if (take.step >= pass.reduceSteps && landsInScratch(take.step)) {
      streamingCopy(pass.out + offset, arrived, elements * elementSize);
    }
    if (take.step + 1 < pass.steps) {
      send(pass.out + offset, elements, take.step + 1, segment, take.chunk);
    }
    advance(take);
    postReceives();
  }
  waitForAll(static_cast<int>(sends_.size()), sends_.data(), waitMode_);
}

}  // namespace ringtrain::collectives
