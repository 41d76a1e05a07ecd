// GoogleTest main for tests run under mpirun.
//
// Every rank runs every test. When a test ends, the ranks exchange their verdicts: if the test
// failed on any rank it is marked failed on all of them, with each failing rank's messages
// prefixed by "[rank r/N host]", so rank 0's output (the only one printed in full) names the rank
// and the reason. Every rank exits with the worst status of all, so mpirun's status is right too.
//
// A test must not stop early (ASSERT_*) on some ranks while others go on into a collective:
// those would wait for ever. Use EXPECT_* before collectives; CTest's timeout is the backstop.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include <mpi.h>

#include "collectives/environment.h"
#include "collectives/mpi_check.h"
#include "tests/support/mpi_test_environment.h"

namespace ringtrain::testing {
namespace {

const collectives::MpiEnvironment* gEnvironment = nullptr;

std::vector<std::string> allgatherStrings(const std::string& mine) {
  int size = 0;
  RINGTRAIN_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  int length = static_cast<int>(mine.size());
  std::vector<int> lengths(static_cast<std::size_t>(size));
  RINGTRAIN_MPI_CHECK(
      MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, MPI_COMM_WORLD));
  std::vector<int> offsets(static_cast<std::size_t>(size), 0);
  for (int r = 1; r < size; ++r)
    offsets[r] = offsets[r - 1] + lengths[r - 1];
  std::string all(static_cast<std::size_t>(offsets.back() + lengths.back()), '\0');
  RINGTRAIN_MPI_CHECK(MPI_Allgatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(),
                                     offsets.data(), MPI_CHAR, MPI_COMM_WORLD));
  std::vector<std::string> result;
  for (int r = 0; r < size; ++r)
    result.push_back(all.substr(offsets[r], lengths[r]));
  return result;
}

class CrossRankVerdict : public ::testing::EmptyTestEventListener {
 public:
  void OnTestStart(const ::testing::TestInfo&) override { failures_.clear(); }

  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    failures_ += processLabel() + " " +
                 (result.file_name() ? std::string(result.file_name()) : "?") + ":" +
                 std::to_string(result.line_number()) + ": " + result.message() + "\n";
  }

  // Runs before the result printer's OnTestEnd (GoogleTest calls OnTestEnd in reverse order of
  // registration), while the test is still current, so a failure added here counts for it.
  void OnTestEnd(const ::testing::TestInfo&) override {
    const std::vector<std::string> all = allgatherStrings(failures_);
    const int myRank = gEnvironment->worldRank();
    for (std::size_t r = 0; r < all.size(); ++r) {
      if (static_cast<int>(r) == myRank || all[r].empty()) continue;
      ADD_FAILURE() << "failed on rank " << r << ":\n" << all[r];
    }
  }

 private:
  std::string failures_;
};

}  // namespace

const collectives::MpiEnvironment& mpiEnvironment() {
  return *gEnvironment;
}

}  // namespace ringtrain::testing

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ringtrain::collectives::MpiEnvironment environment(&argc, &argv);
  ringtrain::testing::gEnvironment = &environment;

  auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
  if (environment.worldRank() != 0) delete listeners.Release(listeners.default_result_printer());
  listeners.Append(new ringtrain::testing::CrossRankVerdict);

  int status = RUN_ALL_TESTS();
  int worst = status;
  RINGTRAIN_MPI_CHECK(MPI_Allreduce(&status, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
  return worst;
}
