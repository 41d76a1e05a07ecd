// Reader of the IDX format that MNIST is published in (LeCun et al.), plain or gzip-compressed.
//
// An IDX file is a 4-byte magic number, one big-endian uint32 size per dimension, then the data
// in row-major order. The magic number's first two bytes are zero, the third is the element type
// (0x08: unsigned byte, the only one MNIST uses and the only one read here) and the fourth the
// number of dimensions: 0x00000803 for images (count, rows, columns), 0x00000801 for labels.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

namespace ringtrain::data {

inline constexpr std::uint32_t kIdxImagesMagic = 0x00000803;
inline constexpr std::uint32_t kIdxLabelsMagic = 0x00000801;

struct IdxImages {
  std::int64_t count = 0;
  std::int64_t rows = 0;
  std::int64_t columns = 0;
  std::vector<std::uint8_t> pixels;  // count x rows x columns, row-major, 0 = background
};

// Read a whole file (inflated when the name ends in .gz) and check it against its header: magic
// number, type code, number of dimensions, non-zero sizes, and a length of exactly header +
// data. Any problem throws DataError with one line that names the file and says what is wrong,
// e.g. "truncated: header says 60000 images of 28x28 (47040016 bytes) but the file has 1000
// bytes". Nothing is allocated from a size field before the bytes it describes have been read.
IdxImages readIdxImages(const std::filesystem::path& path);

// As readIdxImages, for a labels file; also checks every label is below numClasses.
std::vector<std::uint8_t> readIdxLabels(const std::filesystem::path& path, int numClasses);

}  // namespace ringtrain::data
