// hdf5_read_perf: how fast Hdf5Dataset::gather delivers batches, from the page cache and from the
// disk.
//
//   build/bin/hdf5_read_perf                              60,000 MNIST-sized samples, generated
//   build/bin/hdf5_read_perf --samples 2000000 --dir /scratch   a 1.5 GB file
//   build/bin/hdf5_read_perf --file data/mnist-h5/train.h5
//
// Without --file it writes a dataset of --samples samples of --shape (H,W,C) uint8 into --dir (a
// temporary file, removed at the end unless --keep). Then, for random batches (a fresh
// permutation cut into batches, what ShardedSampler hands one rank) and for sequential ones
// (consecutive indices: one hyperslab block per batch), it reads --batches batches of --batch
// samples twice: "cold", right after asking the kernel to drop the file from the page cache
// (posix_fadvise DONTNEED after fsync; a VM's host may still cache it), and "warm", right after
// that first pass read the same batches. It prints samples/s, MB/s of sample data, and the
// mean, median and 99th-percentile time per batch.
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "data/data_error.h"
#include "data/hdf5_dataset.h"
#include "data/random.h"
#include "options/option_table.h"
#include "src/bench/standalone_options.h"

namespace ringtrain {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Options {
  std::string file;
  std::string dir = fs::temp_directory_path().string();
  std::int64_t samples = 60000;
  std::string shape = "28,28,1";
  int compress = 0;
  std::int64_t batch = 64;
  std::int64_t batches = 500;
  std::uint64_t seed = 42;
  bool keep = false;
};

const options::Table<Options>& optionTable() {
  // The numbers are judged after reading, in parseOptions's words.
  // clang-format off
  static const options::Table<Options> table = bench::inGroup<Options>("hdf5_read_perf options", {
      options::text<Options>("file", RINGTRAIN_FIELD(file), "read this HDF5 dataset instead of generating one"),
      options::text<Options>("dir", RINGTRAIN_FIELD(dir), "where to generate the dataset"),
      bench::anyNumber<Options>("samples", RINGTRAIN_FIELD(samples), "samples to generate"),
      options::text<Options>("shape", RINGTRAIN_FIELD(shape), "H,W,C of a generated sample"),
      bench::anyNumber<Options>("compress", RINGTRAIN_FIELD(compress), "deflate level of the generated file (0: contiguous)"),
      bench::anyNumber<Options>("batch", RINGTRAIN_FIELD(batch), "samples per batch"),
      bench::anyNumber<Options>("batches", RINGTRAIN_FIELD(batches), "batches per measurement"),
      bench::anyNumber<Options>("seed", RINGTRAIN_FIELD(seed), "of the permutation"),
      options::boolean<Options>("keep", RINGTRAIN_FIELD(keep), "keep the generated file"),
  });
  // clang-format on
  return table;
}

std::optional<std::string> parseOptions(int argc, char** argv, Options& o, bool& help) {
  const options::Program program{"hdf5_read_perf", "usage: hdf5_read_perf [options]"};
  if (auto error = bench::parseStandalone(program, optionTable(), argc, argv, o, help))
    return error;
  if (help) return std::nullopt;
  if (o.batch < 1 || o.batches < 1 || o.samples < 1) {
    return std::string("--batch, --batches and --samples must be positive");
  }
  return std::nullopt;
}

data::SampleShape parseShape(const std::string& text) {
  int h = 0, w = 0, c = 0;
  if (std::sscanf(text.c_str(), "%d,%d,%d", &h, &w, &c) != 3 || h < 1 || w < 1 || c < 1) {
    throw data::DataError("--shape " + text + ": expected H,W,C, three positive integers");
  }
  return {c, h, w};
}

// Writes the dataset in slabs of 8192 samples, so a file larger than memory can be made.
void generate(const fs::path& path, const Options& o) {
  data::Hdf5DatasetSpec spec;
  spec.shape = parseShape(o.shape);
  spec.count = o.samples;
  spec.numClasses = 10;
  spec.source = "hdf5_read_perf synthetic bytes";
  spec.compressionLevel = o.compress;
  data::Hdf5DatasetWriter writer(path, spec);
  const std::int64_t slab = 8192;
  const auto elements = static_cast<std::size_t>(spec.shape.elements());
  std::vector<std::uint8_t> pixels;
  std::vector<std::int32_t> labels;
  for (std::int64_t first = 0; first < o.samples; first += slab) {
    const std::int64_t n = std::min(slab, o.samples - first);
    pixels.resize(static_cast<std::size_t>(n) * elements);
    labels.resize(static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < pixels.size(); ++i)
      pixels[i] = static_cast<std::uint8_t>(data::hash64(o.seed, first * elements + i));
    for (std::int64_t i = 0; i < n; ++i)
      labels[static_cast<std::size_t>(i)] = static_cast<std::int32_t>((first + i) % 10);
    writer.append(pixels, labels);
  }
  writer.finish();
}

// Drops the file's pages from the page cache (they are clean: the writer fsynced it).
void dropFromPageCache(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

struct Result {
  double seconds = 0;
  std::vector<double> batchMs;
};

Result readBatches(const data::Dataset& dataset, const std::vector<std::int64_t>& order,
                   std::int64_t batch, std::int64_t batches) {
  const auto elements = static_cast<std::size_t>(dataset.sampleShape().elements());
  std::vector<float> images(static_cast<std::size_t>(batch) * elements);
  std::vector<std::int32_t> labels(static_cast<std::size_t>(batch));
  Result result;
  const auto start = Clock::now();
  for (std::int64_t b = 0; b < batches; ++b) {
    const auto first =
        static_cast<std::size_t>((b * batch) % static_cast<std::int64_t>(order.size()));
    const std::size_t n = std::min(static_cast<std::size_t>(batch), order.size() - first);
    const auto t0 = Clock::now();
    dataset.gather(std::span(order).subspan(first, n), images.data(), labels.data());
    result.batchMs.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return result;
}

void printRow(const char* order, const char* cache, const Result& r, std::int64_t batch,
              std::size_t sampleBytes) {
  std::vector<double> ms = r.batchMs;
  std::sort(ms.begin(), ms.end());
  double total = 0;
  for (const double m : ms)
    total += m;
  const double samples = static_cast<double>(ms.size()) * static_cast<double>(batch);
  fmt::print("{:>10} {:>5} {:>8} {:>12.0f} {:>9.1f} {:>9.3f} {:>9.3f} {:>9.3f}\n", order, cache,
             ms.size(), samples / r.seconds,
             samples * static_cast<double>(sampleBytes) / r.seconds / 1e6,
             total / static_cast<double>(ms.size()), ms[ms.size() / 2],
             ms[std::min(ms.size() - 1, ms.size() * 99 / 100)]);
}

int run(const Options& o) {
  fs::path path = o.file;
  const bool generated = path.empty();
  if (generated) {
    path = fs::path(o.dir) / ("hdf5_read_perf-" + std::to_string(getpid()) + ".h5");
    const auto start = Clock::now();
    generate(path, o);
    fmt::print("generated {} ({:.1f} MB) in {:.1f} s\n", path.string(),
               static_cast<double>(fs::file_size(path)) / 1e6,
               std::chrono::duration<double>(Clock::now() - start).count());
  }
  const data::Hdf5Dataset dataset(path);
  const std::size_t sampleBytes = static_cast<std::size_t>(dataset.sampleShape().elements()) *
                                  (dataset.pixelType() == data::PixelType::kUint8 ? 1 : 4);
  fmt::print("{}\n", dataset.describe());
  fmt::print("batches of {} samples ({} bytes each as stored)\n\n", o.batch, sampleBytes);
  fmt::print("{:>10} {:>5} {:>8} {:>12} {:>9} {:>9} {:>9} {:>9}\n", "order", "cache", "batches",
             "samples/s", "MB/s", "mean ms", "p50 ms", "p99 ms");

  data::SplitMix64 rng(o.seed);
  const std::vector<std::int64_t> random = data::shuffledIndices(dataset.size(), rng);
  std::vector<std::int64_t> sequential(static_cast<std::size_t>(dataset.size()));
  for (std::size_t i = 0; i < sequential.size(); ++i)
    sequential[i] = static_cast<std::int64_t>(i);
  for (const auto& [name, order] :
       {std::pair<const char*, const std::vector<std::int64_t>&>{"random", random},
        {"sequential", sequential}}) {
    dropFromPageCache(path);
    printRow(name, "cold", readBatches(dataset, order, o.batch, o.batches), o.batch, sampleBytes);
    printRow(name, "warm", readBatches(dataset, order, o.batch, o.batches), o.batch, sampleBytes);
  }
  if (generated && !o.keep) fs::remove(path);
  return 0;
}

}  // namespace
}  // namespace ringtrain

int main(int argc, char** argv) {
  ringtrain::Options options;
  bool help = false;
  if (const auto error = ringtrain::parseOptions(argc, argv, options, help)) {
    std::cerr << "hdf5_read_perf: " << *error << "\n";
    return 2;
  }
  if (help) return 0;
  try {
    return ringtrain::run(options);
  } catch (const std::exception& e) {
    std::cerr << "hdf5_read_perf: error: " << e.what() << "\n";
    return 1;
  }
}
