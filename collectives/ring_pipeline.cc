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

std::size_t RingLayout::chunkCount(int segment, std::size_t chunkElements) const {
  return (segmentLength(segment) + chunkElements - 1) / chunkElements;
}

RingPipeline::RingPipeline(MPI_Comm comm, const RingChunking& chunking, WaitMode waitMode)
    : comm_(comm), chunking_(chunking), waitMode_(waitMode) {
  chunking_.receiveBytes = std::max(chunking_.receiveBytes, AlignedBuffer::kAlignment);
  chunking_.sendBytes = std::max(chunking_.sendBytes, AlignedBuffer::kAlignment);
  chunking_.receiveDepth = std::max(chunking_.receiveDepth, 1);
  RINGTRAIN_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  RINGTRAIN_MPI_CHECK(MPI_Comm_size(comm_, &size_));
  // At least one huge page, so that the landing slots are backed by one (see AlignedBuffer).
  scratch_.resize(
      std::max(static_cast<std::size_t>(chunking_.receiveDepth) * chunking_.receiveBytes,
               AlignedBuffer::kHugePage));
}

std::size_t RingPipeline::chunkElements(std::size_t bytes, std::size_t elementSize) {
  const std::size_t lineElements = AlignedBuffer::kAlignment / elementSize;
  return std::max(lineElements, bytes / elementSize / lineElements * lineElements);
}

namespace {
// A position in a pass's sequence of receives over (step, chunk).
struct ReceiveCursor {
  int step = 0;
  std::size_t chunk = 0;
  std::size_t index = 0;  // position in the whole sequence
};
}  // namespace

// One RingPipeline::run.
//
// The receives of a pass form one sequence over (step, chunk). They are posted in that order, at
// most receiveDepth ahead of the one being processed, and processed in that order; a chunk to be
// reduced lands in scratch slot (its index in the sequence) % receiveDepth, which is free again
// by the time it is reused because the chunk that used it receiveDepth receives earlier has been
// processed. Chunks to be stored land directly in `out` (in place, unless landInOut: in scratch,
// then streamed into `out`). Tags are 1 + step: within a step, MPI's non-overtaking rule keeps
// chunks in order.
//
// What arrives is sent on at the next step as soon as it is processed, so that step s+1 overlaps
// step s instead of waiting for the whole segment. Received and sent chunks may differ in length
// (a neighbour on this node on one side, one on another node on the other): after each processed
// chunk, every whole send chunk within the processed prefix of the segment goes out, the last
// one when the segment is complete. Every element is still reduced by the same rank in the same
// order whatever the chunks, so the result does not depend on them.
class RingPipeline::Run {
 public:
  Run(RingPipeline& pipeline, const RingPass& pass);
  void execute();

 private:
  int segmentAt(int step, int back) const {
    return ((pass_.firstSegment - step - back) % n_ + n_) % n_;
  }
  std::size_t receiveCount(int step) const {
    return pass_.layout.chunkCount(segmentAt(step, 1), receiveChunk_);
  }
  std::size_t receiveLength(int segment, std::size_t c) const {
    return std::min(receiveChunk_, pass_.layout.segmentLength(segment) - c * receiveChunk_);
  }
  std::byte* outAt(int segment, std::size_t offset) const {
    return pass_.out + (pass_.layout.segmentBegin(segment) + offset) * elementSize_;
  }
  int& sendSlot(int segment, std::size_t offset) {
    return p_.lastSendFromOut_[static_cast<std::size_t>(segment) * sendChunksPerSegment_ +
                               offset / sendChunk_];
  }
  // In place, a stored chunk lands in scratch too and is then streamed into `out` (unless
  // landInOut): received directly, the copy would write lines of `out` that the right neighbour
  // read at step 0, which is slow where the two cores do not share a cache.
  bool landsInScratch(int step) const {
    return step < pass_.reduceSteps || (pass_.own == pass_.out && !pass_.landInOut);
  }
  std::byte* landing(const ReceiveCursor& cursor) const;
  void advance(ReceiveCursor& cursor) const;
  void skipEmptySteps(ReceiveCursor& cursor) const;
  void sendReady(int step, int segment, const std::byte* base, std::size_t ready);
  void retireSendsFrom(int segment, std::size_t begin, std::size_t end);
  void postReceives();
  void process(const ReceiveCursor& cursor);

  RingPipeline& p_;
  const RingPass& pass_;
  const int n_;
  const std::size_t elementSize_;
  const std::size_t receiveChunk_;
  const std::size_t sendChunk_;
  const std::size_t sendChunksPerSegment_;
  const std::size_t depth_;
  ReceiveCursor post_;
  ReceiveCursor take_;
  std::size_t sent_ = 0;  // elements of the segment being sent on that went out already
};

RingPipeline::Run::Run(RingPipeline& pipeline, const RingPass& pass)
    : p_(pipeline),
      pass_(pass),
      n_(pipeline.size_),
      elementSize_(sizeOf(pass.type)),
      receiveChunk_(chunkElements(pipeline.chunking_.receiveBytes, elementSize_)),
      sendChunk_(chunkElements(pipeline.chunking_.sendBytes, elementSize_)),
      sendChunksPerSegment_((pass.layout.stride + sendChunk_ - 1) / sendChunk_),
      depth_(static_cast<std::size_t>(pipeline.chunking_.receiveDepth)) {}

std::byte* RingPipeline::Run::landing(const ReceiveCursor& cursor) const {
  if (landsInScratch(cursor.step)) {
    return p_.scratch_.data() + (cursor.index % depth_) * receiveChunk_ * elementSize_;
  }
  return outAt(segmentAt(cursor.step, 1), cursor.chunk * receiveChunk_);
}

void RingPipeline::Run::advance(ReceiveCursor& cursor) const {
  ++cursor.index;
  ++cursor.chunk;
  while (cursor.step < pass_.steps && cursor.chunk >= receiveCount(cursor.step)) {
    ++cursor.step;
    cursor.chunk = 0;
  }
}

void RingPipeline::Run::skipEmptySteps(ReceiveCursor& cursor) const {
  while (cursor.step < pass_.steps && receiveCount(cursor.step) == 0)
    ++cursor.step;
}

// Sends at `step` the whole send chunks of `segment` (which starts at `base`) that lie within
// its first `ready` elements and have not gone out yet.
void RingPipeline::Run::sendReady(int step, int segment, const std::byte* base, std::size_t ready) {
  const std::size_t length = pass_.layout.segmentLength(segment);
  const bool fromOut = base >= pass_.out && base < pass_.out + pass_.layout.count * elementSize_;
  while (sent_ < ready) {
    const std::size_t end = std::min(sent_ + sendChunk_, length);
    if (end > ready) break;
    if (fromOut) sendSlot(segment, sent_) = static_cast<int>(p_.sends_.size());
    p_.sends_.emplace_back();
    RINGTRAIN_MPI_CHECK(MPI_Isend(base + sent_ * elementSize_,
                                  static_cast<int>((end - sent_) * elementSize_), MPI_BYTE,
                                  (p_.rank_ + 1) % n_, 1 + step, p_.comm_, &p_.sends_.back()));
    sent_ = end;
  }
}

// A chunk of `out` that was sent on is overwritten later by the final value of the same chunk
// (the all-gather). By then the send has been delivered (the final value depends on it), but
// MPI forbids writing a buffer whose send is still pending, so the receive first retires every
// send from the elements [begin, end) of `segment`.
void RingPipeline::Run::retireSendsFrom(int segment, std::size_t begin, std::size_t end) {
  for (std::size_t offset = begin / sendChunk_ * sendChunk_; offset < end; offset += sendChunk_) {
    const int slot = sendSlot(segment, offset);
    if (slot >= 0) {
      waitFor(&p_.sends_[static_cast<std::size_t>(slot)], MPI_STATUS_IGNORE, p_.waitMode_);
    }
  }
}

// An all-gather receive at step t lands in the part of `out` that this rank reduced at step
// t - n and sent on from there: it is posted only once step t - n has been processed, so that no
// receive is pending on memory this rank still writes and sends from (MPI forbids it, even though
// the final value can only arrive after that send). Posting at most n - 1 steps ahead is still
// far more than the pipeline needs.
void RingPipeline::Run::postReceives() {
  while (post_.step < pass_.steps && post_.index < take_.index + depth_ &&
         !(post_.step >= pass_.reduceSteps && post_.step - n_ >= take_.step)) {
    const int segment = segmentAt(post_.step, 1);
    const std::size_t begin = post_.chunk * receiveChunk_;
    const std::size_t elements = receiveLength(segment, post_.chunk);
    if (post_.step >= pass_.reduceSteps) retireSendsFrom(segment, begin, begin + elements);
    RINGTRAIN_MPI_CHECK(MPI_Irecv(landing(post_), static_cast<int>(elements * elementSize_),
                                  MPI_BYTE, (p_.rank_ - 1 + n_) % n_, 1 + post_.step, p_.comm_,
                                  &p_.receives_[post_.index % depth_]));
    advance(post_);
  }
}

// Waits for the chunk at `cursor`, reduces or stores it and sends on what is ready.
void RingPipeline::Run::process(const ReceiveCursor& cursor) {
  const int segment = segmentAt(cursor.step, 1);
  const std::size_t begin = cursor.chunk * receiveChunk_;
  const std::size_t elements = receiveLength(segment, cursor.chunk);
  const std::size_t offset = (pass_.layout.segmentBegin(segment) + begin) * elementSize_;
  std::byte* arrived = landing(cursor);
  waitFor(&p_.receives_[cursor.index % depth_], MPI_STATUS_IGNORE, p_.waitMode_);
  if (cursor.step < pass_.reduceSteps) {
    const bool lastReduce = cursor.step == pass_.reduceSteps - 1;
    reduceArrays(pass_.type, pass_.op, arrived, pass_.own + offset, pass_.out + offset, elements,
                 lastReduce ? pass_.divisor : 1, pass_.reduceStore);
  } else if (landsInScratch(cursor.step)) {
    streamingCopy(pass_.out + offset, arrived, elements * elementSize_);
  }
  if (cursor.step + 1 < pass_.steps) {
    if (cursor.chunk == 0) sent_ = 0;  // a new segment to send on
    sendReady(cursor.step + 1, segment, outAt(segment, 0), begin + elements);
  }
}

void RingPipeline::Run::execute() {
  p_.sends_.clear();
  p_.receives_.assign(depth_, MPI_REQUEST_NULL);
  p_.lastSendFromOut_.assign(static_cast<std::size_t>(n_) * sendChunksPerSegment_, -1);
  // Step 0 sends this rank's own segment, all chunks at once.
  const int firstSent = segmentAt(0, 0);
  sendReady(0, firstSent, pass_.firstSend, pass_.layout.segmentLength(firstSent));
  skipEmptySteps(post_);
  skipEmptySteps(take_);
  postReceives();
  while (take_.step < pass_.steps) {
    process(take_);
    advance(take_);
    postReceives();
  }
  waitForAll(static_cast<int>(p_.sends_.size()), p_.sends_.data(), p_.waitMode_);
}

void RingPipeline::run(const RingPass& pass) {
  if (pass.steps <= 0 || size_ == 1) return;
  Run(*this, pass).execute();
}

}  // namespace ringtrain::collectives
