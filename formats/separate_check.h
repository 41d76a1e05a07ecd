// Reading a file first in a separate process, so that a file that crashes its reader is refused
// instead of taking the job down.
//
// libhdf5 1.10 (Debian 12's) has memory-safety bugs of its own on malformed files: a forged
// checkpoint or HDF5 dataset can make it crash (SIGSEGV) whatever its caller does
// (docs/fuzzing.md). A program that registers itself with setFileCheckProgram has the HDF5
// readers first run `PROGRAM check KIND FILE` in a child process: started with posix_spawn (no
// fork of an MPI process's memory, which RDMA networks do not tolerate), no MPI, output
// discarded. If that child dies by a signal, the file is refused with a FormatError naming it; if
// it exits (well or with an error), the caller reads the file itself and reports any problem as
// usual. Without a registered program (unit tests, the fuzzers) nothing is spawned.
#pragma once

#include <chrono>
#include <filesystem>
#include <string_view>

namespace ringtrain::formats {

// The program to run for checks (empty: none, the default). Not thread-safe: set it at start-up.
void setFileCheckProgram(const std::filesystem::path& program);

// Runs `PROGRAM check KIND FILE` and waits for it (at most `limit`; then it is killed and the file
// refused). Throws FormatError "FILE: reading it crashed the check process (signal 11, Segmentation
// fault): the file is corrupt or forged ..." when the child dies by a signal or runs out of time.
// Returns when there is no program, when the child exits, or when it cannot be started (the
// in-process read then goes ahead unprotected; a warning goes to stderr).
void checkInSeparateProcess(std::string_view kind, const std::filesystem::path& file,
                            std::chrono::seconds limit = std::chrono::seconds(600));

}  // namespace ringtrain::formats
