// startSend / startReceive / waitTransfer under mpirun, every rank checking what it received: a
// ring of messages (rank r to r + 1) whose receives start before the sends, messages of one tag in
// the order sent whatever the order of the waits, and the errors of a bad rank, tag or length.
#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <vector>

#include "ringtrain/ringtrain.h"

namespace {

ringtrain::Options plainOptions() {
  ringtrain::Options options;
  options.readEnvironment = false;
  return options;
}

class PointToPoint : public testing::Test {
 protected:
  void SetUp() override { ringtrain::start(plainOptions()); }
  void TearDown() override { ringtrain::shutdown(); }
  int rank = 0, size = 0, next = 0, previous = 0;
  void place() {
    rank = ringtrain::rank(), size = ringtrain::size();
    next = (rank + 1) % size, previous = (rank + size - 1) % size;
  }
};

std::vector<std::int32_t> message(int from, std::size_t count, int salt) {
  std::vector<std::int32_t> values(count);
  std::iota(values.begin(), values.end(), from * 1000000 + salt);
  return values;
}

TEST_F(PointToPoint, ARingOfMessagesArrivesWhole) {
  place();
  const std::size_t count = 300000;  // 1.2 MB: beyond any eager limit
  const std::vector<std::int32_t> out = message(rank, count, 7);
  std::vector<std::int32_t> in(count, -1);
  // The receive first on every rank: a send must not need its receiver waiting already.
  const auto receive = ringtrain::startReceive(in.data(), count * 4, previous, 3);
  const auto send = ringtrain::startSend(out.data(), count * 4, next, 3);
  ringtrain::waitTransfer(receive);
  ringtrain::waitTransfer(send);
  EXPECT_EQ(in, message(previous, count, 7)) << "rank " << rank;
}

TEST_F(PointToPoint, MessagesOfOneTagArriveInOrderAndTagsApart) {
  place();
  const auto first = message(rank, 5, 1), second = message(rank, 5, 2), other = message(rank, 5, 3);
  std::vector<std::int32_t> a(5), b(5), c(5);
  std::vector<std::int64_t> handles;
  handles.push_back(ringtrain::startSend(first.data(), 20, next, 0));
  handles.push_back(ringtrain::startSend(second.data(), 20, next, 0));
  handles.push_back(ringtrain::startSend(other.data(), 20, next, 9));
  handles.push_back(ringtrain::startReceive(c.data(), 20, previous, 9));  // tag 9 first
  handles.push_back(ringtrain::startReceive(a.data(), 20, previous, 0));
  handles.push_back(ringtrain::startReceive(b.data(), 20, previous, 0));
  // Waited for last first: b's wait takes a's message into a, as MPI's order has it.
  for (auto it = handles.rbegin(); it != handles.rend(); ++it)
    ringtrain::waitTransfer(*it);
  EXPECT_EQ(a, message(previous, 5, 1)) << "rank " << rank;
  EXPECT_EQ(b, message(previous, 5, 2)) << "rank " << rank;
  EXPECT_EQ(c, message(previous, 5, 3)) << "rank " << rank;
}

TEST_F(PointToPoint, AShorterOrLongerMessageIsAnError) {
  place();
  std::vector<std::int32_t> out = message(rank, 4, 0), in(8);
  // 16 bytes where 32 are expected, then 32 where 16 are.
  auto receive = ringtrain::startReceive(in.data(), 32, previous, 1);
  auto send = ringtrain::startSend(out.data(), 16, next, 1);
  EXPECT_THROW(ringtrain::waitTransfer(receive), ringtrain::Error) << "rank " << rank;
  ringtrain::waitTransfer(send);
  std::vector<std::int32_t> longer = message(rank, 8, 0);
  receive = ringtrain::startReceive(in.data(), 16, previous, 2);
  send = ringtrain::startSend(longer.data(), 32, next, 2);
  EXPECT_THROW(ringtrain::waitTransfer(receive), ringtrain::Error) << "rank " << rank;
  ringtrain::waitTransfer(send);
}

TEST_F(PointToPoint, ABadRankTagOrHandleIsInvalidArgument) {
  place();
  std::int32_t value = 0;
  EXPECT_THROW(ringtrain::startSend(&value, 4, size, 0), ringtrain::InvalidArgument);
  EXPECT_THROW(ringtrain::startReceive(&value, 4, -1, 0), ringtrain::InvalidArgument);
  EXPECT_THROW(ringtrain::startSend(&value, 4, next, -2), ringtrain::InvalidArgument);
  EXPECT_THROW(ringtrain::waitTransfer(12345), ringtrain::InvalidArgument);
}

}  // namespace
