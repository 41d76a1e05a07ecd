// A gradient profile: a model's parameter tensors in the order backward finishes them, each with
// the computation backward does before it, as bench/profiles/*.txt hold them (written by
// scripts/bench/make_profiles.py). `ringtrain bench` runs the data-parallel step of a profile.
//
// File format: '#' starts a comment line; every other line is one tensor,
//   name shape flops-per-sample
// shape being the dimensions joined by 'x' ("1000x2048"), flops-per-sample the forward FLOPs per
// sample of the work backward does just before this tensor's gradient is final.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace ringtrain::bench {

struct ProfileTensor {
  std::string name;
  std::vector<std::int64_t> shape;
  double flopsPerSample = 0;
  std::int64_t count() const;  // product of the shape
};

struct GradientProfile {
  std::string name;                    // the file's stem: "resnet50"
  std::vector<ProfileTensor> tensors;  // backward order: the first is the first gradient ready
  std::int64_t parameters() const;
  double flopsPerSample() const;
};

// Reads a profile file. Throws std::runtime_error naming the file and line of a bad line, or a
// file that cannot be read or holds no tensor or the same tensor name twice.
GradientProfile readProfile(const std::filesystem::path& file);

// The variable naming a folder of NAME.txt profiles, for a program outside the build tree and the
// install prefix (read where profiles are looked up: it is no option of `ringtrain bench`).
inline constexpr const char* kProfileDirVariable = "RINGTRAIN_PROFILE_DIR";

// The folder of the named profiles, and how it was found (for messages).
struct ProfileFolder {
  std::filesystem::path path;
  std::string origin;  // "RINGTRAIN_PROFILE_DIR" or "beside the program PROGRAM"
};

// `variable` (RINGTRAIN_PROFILE_DIR's value; null or empty: unset) when set, else
// share/ringtrain/profiles beside the program's bin folder (where the build copies bench/profiles
// and `cmake --install` puts them).
ProfileFolder profileFolder(const std::filesystem::path& program, const char* variable);

// `nameOrFile` as a file: itself where it names a path (holds a '/' or ends in .txt), else
// NAME.txt in `folder`. Throws std::runtime_error saying where it looked and why that failed (no
// such folder; no such name, listing the known ones).
std::filesystem::path profileFile(const std::string& nameOrFile, const ProfileFolder& folder);

}  // namespace ringtrain::bench
