// checkInSeparateProcess (formats/separate_check.h) with stand-in check programs: shell scripts
// that crash, fail, hang or succeed, so each verdict is seen without a file that crashes libhdf5
// (the end-to-end case with real forged checkpoints is tests/resilience/forged_checkpoint_test.sh).
#include "formats/separate_check.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "formats/format_error.h"

namespace ringtrain::formats {
namespace {

namespace fs = std::filesystem;

class SeparateCheckTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("ringtrain-separate-check-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override {
    setFileCheckProgram({});
    fs::remove_all(dir_);
  }
  // An executable script `name` with `body`; its arguments are "check KIND FILE". It also leaves
  // them in args.txt, to check what it was given.
  fs::path script(const std::string& name, const std::string& body) {
    const fs::path path = dir_ / name;
    std::ofstream(path) << "#!/bin/sh\necho \"$@\" > '" << (dir_ / "args.txt").string() << "'\n"
                        << body << "\n";
    fs::permissions(path, fs::perms::owner_all);
    return path;
  }
  std::string args() {
    std::ifstream in(dir_ / "args.txt");
    std::string line;
    std::getline(in, line);
    return line;
  }
  // The FormatError's message, or "" when none was thrown.
  static std::string verdict(const fs::path& file,
                             std::chrono::seconds limit = std::chrono::seconds(60)) {
    try {
      checkInSeparateProcess("checkpoint", file, limit);
    } catch (const FormatError& e) {
      return e.what();
    }
    return "";
  }
  fs::path dir_;
};

TEST_F(SeparateCheckTest, WithoutAProgramNothingRuns) {
  EXPECT_EQ(verdict(dir_ / "any.h5"), "");
  EXPECT_FALSE(fs::exists(dir_ / "args.txt"));
}

TEST_F(SeparateCheckTest, AGoodFileAndABadOneAreLeftToTheCallersOwnRead) {
  setFileCheckProgram(script("good", "exit 0"));
  EXPECT_EQ(verdict(dir_ / "ckpt-00000020.h5"), "");
  EXPECT_EQ(args(), "check checkpoint " + (dir_ / "ckpt-00000020.h5").string());
  // Exit status 2 (the file is bad, in a way the reader reports itself): no verdict here.
  setFileCheckProgram(script("bad", "echo 'error: truncated'; exit 2"));
  EXPECT_EQ(verdict(dir_ / "x.h5"), "");
}

TEST_F(SeparateCheckTest, AFileThatKillsTheCheckIsRefusedNamingTheFileAndTheSignal) {
  setFileCheckProgram(script("crash", "kill -SEGV $$"));
  const std::string message = verdict(dir_ / "forged.h5");
  EXPECT_NE(message.find((dir_ / "forged.h5").string() +
                         ": reading it crashed a separate check process (signal 11, Segmentation "
                         "fault)"),
            std::string::npos)
      << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << "one line";
  setFileCheckProgram(script("abort", "kill -ABRT $$"));
  EXPECT_NE(verdict(dir_ / "forged.h5").find("(signal 6, Aborted)"), std::string::npos);
}

TEST_F(SeparateCheckTest, ACheckThatHangsIsKilledAtTheLimitAndTheFileRefused) {
  setFileCheckProgram(script("hang", "exec sleep 30"));
  const auto start = std::chrono::steady_clock::now();
  const std::string message = verdict(dir_ / "slow.h5", std::chrono::seconds(1));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_NE(message.find("slow.h5: reading it took over 1 s in a separate check process, which "
                         "was killed"),
            std::string::npos)
      << message;
}

TEST_F(SeparateCheckTest, AProgramThatCannotStartLeavesTheReadUnprotectedNotRefused) {
  setFileCheckProgram(dir_ / "no-such-program");
  EXPECT_EQ(verdict(dir_ / "any.h5"), "");
}

}  // namespace
}  // namespace ringtrain::formats
