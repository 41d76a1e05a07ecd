// idx_to_hdf5: IDX images and labels (plain or .gz) to ringtrain's HDF5 dataset layout.
//
//   idx_to_hdf5 IMAGES LABELS OUT.h5 [--classes N] [--source TEXT] [--compress LEVEL]
//   idx_to_hdf5 --mnist DIR OUT_DIR [--compress LEVEL]
//
// The first form converts one pair of files; the second MNIST's four files in DIR (as
// data/fetch_mnist.sh leaves them) into OUT_DIR/train.h5 and OUT_DIR/test.h5, the pair
// loadHdf5Pair reads. Images become /images (N x H x W x 1, uint8), labels /labels (int32), and
// the attributes num_classes (default 10) and source (default: the IDX file names) are set; see
// data/hdf5_dataset.h for the layout. --compress 1..9 stores deflated chunks of 64 images (smaller,
// slower to read at random); the default 0 stores the images contiguously. Each output is written
// to a temporary file and renamed into place once complete. Errors: one line, exit status 1;
// bad arguments: usage, exit status 2.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include "data/data_error.h"
#include "data/hdf5_dataset.h"
#include "data/idx_dataset.h"
#include "data/idx_reader.h"

namespace {

namespace fs = std::filesystem;
using ringtrain::data::DataError;

struct Options {
  std::vector<std::string> positional;
  bool mnist = false;
  int classes = ringtrain::data::kMnistClasses;
  std::string source;
  int compress = 0;
};

void convert(const fs::path& imagesPath, const fs::path& labelsPath, const fs::path& out,
             const Options& options) {
  const ringtrain::data::IdxImages images = ringtrain::data::readIdxImages(imagesPath);
  const std::vector<std::uint8_t> labels =
      ringtrain::data::readIdxLabels(labelsPath, options.classes);
  if (static_cast<std::int64_t>(labels.size()) != images.count) {
    throw DataError(labelsPath.string() + ": holds " + std::to_string(labels.size()) +
                    " labels but " + imagesPath.string() + " holds " +
                    std::to_string(images.count) + " images");
  }
  ringtrain::data::Hdf5DatasetSpec spec;
  spec.shape = {1, images.rows, images.columns};
  spec.count = images.count;
  spec.numClasses = options.classes;
  spec.source = options.source.empty() ? "IDX " + imagesPath.filename().string() + " and " +
                                             labelsPath.filename().string()
                                       : options.source;
  spec.compressionLevel = options.compress;
  const std::vector<std::int32_t> wideLabels(labels.begin(), labels.end());
  ringtrain::data::writeHdf5Dataset(out, spec, images.pixels, wideLabels);
  std::printf("idx_to_hdf5: %s: %lld images of %lldx%lld, %d classes (%s)\n", out.c_str(),
              static_cast<long long>(images.count), static_cast<long long>(images.rows),
              static_cast<long long>(images.columns), options.classes, spec.source.c_str());
}

int run(const Options& options) {
  if (!options.mnist) {
    convert(options.positional[0], options.positional[1], options.positional[2], options);
    return 0;
  }
  const fs::path in = options.positional[0];
  const fs::path out = options.positional[1];
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) throw DataError(out.string() + ": cannot create the folder: " + ec.message());
  using ringtrain::data::findIdxFile;
  convert(findIdxFile(in, "train-images-idx3-ubyte"), findIdxFile(in, "train-labels-idx1-ubyte"),
          out / "train.h5", options);
  convert(findIdxFile(in, "t10k-images-idx3-ubyte"), findIdxFile(in, "t10k-labels-idx1-ubyte"),
          out / "test.h5", options);
  return 0;
}

int usage() {
  std::fprintf(stderr,
               "usage: idx_to_hdf5 IMAGES LABELS OUT.h5 [--classes N] [--source TEXT] "
               "[--compress LEVEL]\n"
               "       idx_to_hdf5 --mnist DIR OUT_DIR [--compress LEVEL]\n");
  return 2;
}

// A whole decimal number in [low, high], or nothing.
bool parseInt(const char* text, int low, int high, int& value) {
  char* end = nullptr;
  const long parsed = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || parsed < low || parsed > high) return false;
  value = static_cast<int>(parsed);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool hasValue = i + 1 < argc;
    if (arg == "--mnist") {
      options.mnist = true;
    } else if (arg == "--classes" && hasValue) {
      if (!parseInt(argv[++i], 1, 256, options.classes)) return usage();
    } else if (arg == "--compress" && hasValue) {
      if (!parseInt(argv[++i], 0, 9, options.compress)) return usage();
    } else if (arg == "--source" && hasValue) {
      options.source = argv[++i];
    } else if (arg.starts_with("-")) {
      return usage();
    } else {
      options.positional.push_back(arg);
    }
  }
  if (options.positional.size() != (options.mnist ? 2u : 3u)) return usage();
  try {
    return run(options);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "idx_to_hdf5: error: %s\n", e.what());
    return 1;
  }
}
