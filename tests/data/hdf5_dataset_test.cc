// The HDF5 dataset: round trips of both pixel types and storage layouts, batches in any order,
// the IDX converter, and one exact one-line message for every way a file can break the layout.
#include "data/hdf5_dataset.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "data/idx_dataset.h"
#include "data/idx_writer.h"
#include "tests/data/data_test_support.h"
#include "tests/formats/format_test_support.h"

namespace ringtrain::data {
namespace {

using formats::testing::RawHdf5File;
using testing::dataErrorOf;
using testing::gatherAll;
using testing::Gathered;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using testing::TempFolder;

// count samples of H x W x C bytes, each value a function of (sample, position).
std::vector<std::uint8_t> patternBytes(std::int64_t count, const SampleShape& s) {
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(count * s.elements()));
  for (std::size_t i = 0; i < bytes.size(); ++i)
    bytes[i] = static_cast<std::uint8_t>((i * 37 + 11) % 256);
  return bytes;
}

// What gather must return for sample i of H x W x C bytes: C x H x W floats.
std::vector<float> expectedSample(const std::vector<std::uint8_t>& stored, std::int64_t i,
                                  const SampleShape& s) {
  std::vector<float> out(static_cast<std::size_t>(s.elements()));
  const std::size_t hw = static_cast<std::size_t>(s.height * s.width);
  for (std::size_t p = 0; p < hw; ++p) {
    for (std::size_t c = 0; c < static_cast<std::size_t>(s.channels); ++c) {
      const std::uint8_t byte =
          stored[static_cast<std::size_t>(i * s.elements()) + p * s.channels + c];
      out[c * hw + p] = static_cast<float>(byte) / 255.0f;
    }
  }
  return out;
}

Hdf5DatasetSpec specOf(const SampleShape& shape, std::int64_t count, int classes) {
  Hdf5DatasetSpec spec;
  spec.shape = shape;
  spec.count = count;
  spec.numClasses = classes;
  spec.source = "test pattern";
  return spec;
}

class Hdf5RoundTripTest : public ::testing::TestWithParam<int> {};

// Any order, repeats and runs of neighbours: every sample comes back, channels first, scaled.
TEST_P(Hdf5RoundTripTest, Uint8SamplesComeBackInTheRequestedOrder) {
  TempFolder folder;
  const SampleShape shape{3, 4, 5};
  const std::int64_t count = 9;
  const auto pixels = patternBytes(count, shape);
  const std::vector<std::int32_t> labels = {0, 1, 2, 3, 4, 5, 6, 0, 1};
  Hdf5DatasetSpec spec = specOf(shape, count, 7);
  spec.compressionLevel = GetParam();
  spec.chunkSamples = 2;
  writeHdf5Dataset(folder / "d.h5", spec, pixels, labels);

  const Hdf5Dataset dataset(folder / "d.h5");
  EXPECT_EQ(dataset.size(), count);
  EXPECT_EQ(dataset.sampleShape(), shape);
  EXPECT_EQ(dataset.numClasses(), 7);
  EXPECT_EQ(dataset.pixelType(), PixelType::kUint8);
  EXPECT_EQ(dataset.source(), "test pattern");
  const std::vector<std::int64_t> indices = {8, 2, 3, 4, 2, 0, 7, 6};
  const Gathered g = gatherAll(dataset, indices);
  for (std::size_t j = 0; j < indices.size(); ++j) {
    const auto expected = expectedSample(pixels, indices[j], shape);
    const std::vector<float> actual(g.images.begin() + static_cast<std::ptrdiff_t>(j * 60),
                                    g.images.begin() + static_cast<std::ptrdiff_t>((j + 1) * 60));
    EXPECT_EQ(actual, expected) << "sample " << indices[j];
    EXPECT_EQ(g.labels[j], labels[static_cast<std::size_t>(indices[j])]);
  }
}

INSTANTIATE_TEST_SUITE_P(ContiguousAndDeflated, Hdf5RoundTripTest, ::testing::Values(0, 6),
                         [](const auto& p) { return p.param ? "Deflated" : "Contiguous"; });

// Where the chunk of /images that starts at `firstSample` lies in `path`: (offset, bytes).
std::pair<haddr_t, hsize_t> imageChunk(const std::filesystem::path& path, hsize_t firstSample) {
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  const hid_t images = H5Dopen2(file, "/images", H5P_DEFAULT);
  const hsize_t offset[4] = {firstSample, 0, 0, 0};
  unsigned filterMask = 0;
  haddr_t address = 0;
  hsize_t bytes = 0;
  const herr_t status = H5Dget_chunk_info_by_coord(images, offset, &filterMask, &address, &bytes);
  H5Dclose(images);
  H5Fclose(file);
  if (status < 0) throw std::runtime_error("H5Dget_chunk_info_by_coord failed");
  return {address, bytes};
}

// `ringtrain check hdf5-dataset` reads every sample: a damaged compressed chunk that holds none
// of the first, middle and last samples (all that the check read before) is found and named.
TEST(Hdf5DatasetTest, ReadingEverySampleFindsADamagedCompressedChunk) {
  TempFolder folder;
  const SampleShape shape{1, 8, 8};
  const std::int64_t count = 512;  // 8 chunks of 64 samples
  std::vector<std::uint8_t> pixels(static_cast<std::size_t>(count * shape.elements()));
  std::uint32_t state = 12345;  // noise, so that every chunk stays large when deflated
  for (std::uint8_t& p : pixels) {
    state = state * 1664525u + 1013904223u;
    p = static_cast<std::uint8_t>(state >> 24);
  }
  const std::vector<std::int32_t> labels(static_cast<std::size_t>(count), 1);
  Hdf5DatasetSpec spec = specOf(shape, count, 2);
  spec.compressionLevel = 6;
  const std::filesystem::path path = folder / "d.h5";
  writeHdf5Dataset(path, spec, pixels, labels);
  readEverySample(Hdf5Dataset(path));  // intact: no error

  const auto [address, bytes] = imageChunk(path, 128);  // samples 128 to 191
  {
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(static_cast<std::streamoff>(address + bytes / 2));
    const std::string damage(16, '\xA5');
    file.write(damage.data(), static_cast<std::streamsize>(damage.size()));
  }
  const Hdf5Dataset damaged(path);
  readSamples(damaged, {0, count / 2, count - 1});  // what a three-sample check saw: nothing
  const std::string message = dataErrorOf([&] { readEverySample(damaged, 100); });
  EXPECT_THAT(message, StartsWith("samples 100 to 199 of 512: ")) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

TEST(Hdf5DatasetTest, Float32SamplesAreReadAsTheyAre) {
  TempFolder folder;
  const SampleShape shape{1, 2, 3};
  std::vector<float> pixels(4 * 6);
  for (std::size_t i = 0; i < pixels.size(); ++i)
    pixels[i] = static_cast<float>(i) / 32.0f;
  Hdf5DatasetSpec spec = specOf(shape, 4, 2);
  spec.pixelType = PixelType::kFloat32;
  Hdf5DatasetWriter writer(folder / "f.h5", spec);
  // In two pieces, as a converter of a large dataset would.
  writer.append(std::span<const float>(pixels).first(12), std::vector<std::int32_t>{0, 1});
  writer.append(std::span<const float>(pixels).subspan(12), std::vector<std::int32_t>{1, 0});
  writer.finish();

  const Hdf5Dataset dataset(folder / "f.h5");
  EXPECT_EQ(dataset.pixelType(), PixelType::kFloat32);
  const Gathered g = gatherAll(dataset, {3, 1});
  EXPECT_EQ(std::vector<float>(g.images.begin(), g.images.begin() + 6),
            std::vector<float>(pixels.begin() + 18, pixels.end()));
  EXPECT_EQ(std::vector<float>(g.images.begin() + 6, g.images.end()),
            std::vector<float>(pixels.begin() + 6, pixels.begin() + 12));
  EXPECT_EQ(g.labels, (std::vector<std::int32_t>{0, 1}));
  EXPECT_THAT(dataset.describe(), HasSubstr("4 samples of 1x2x3 float32, 2 classes"));
}

TEST(Hdf5DatasetTest, AnIndexOutsideTheDatasetIsOutOfRange) {
  TempFolder folder;
  writeHdf5Dataset(folder / "d.h5", specOf({1, 2, 2}, 3, 2), patternBytes(3, {1, 2, 2}),
                   std::vector<std::int32_t>{0, 1, 0});
  const Hdf5Dataset dataset(folder / "d.h5");
  float images[4];
  std::int32_t labels[1];
  const std::int64_t bad[] = {3};
  EXPECT_THROW(dataset.gather(bad, images, labels), std::out_of_range);
}

TEST(Hdf5DatasetTest, AWriterThatDoesNotFinishLeavesNoFileAndTheOldOneIntact) {
  TempFolder folder;
  writeHdf5Dataset(folder / "d.h5", specOf({1, 1, 2}, 1, 2), patternBytes(1, {1, 1, 2}),
                   std::vector<std::int32_t>{1});
  {
    Hdf5DatasetWriter writer(folder / "d.h5", specOf({1, 1, 2}, 5, 2));
    writer.append(patternBytes(2, {1, 1, 2}), std::vector<std::int32_t>{0, 0});
    EXPECT_THROW(writer.finish(), std::invalid_argument);  // 2 of 5 samples
  }
  EXPECT_EQ(Hdf5Dataset(folder / "d.h5").size(), 1);
  std::size_t files = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(folder.path()))
    ++files;
  EXPECT_EQ(files, 1u) << "the temporary file was left behind";
}

TEST(Hdf5DatasetTest, OpensFromAnImageInMemory) {
  TempFolder folder;
  const auto pixels = patternBytes(2, {1, 2, 2});
  writeHdf5Dataset(folder / "d.h5", specOf({1, 2, 2}, 2, 3), pixels,
                   std::vector<std::int32_t>{2, 1});
  const auto bytes = testing::readRaw(folder / "d.h5");
  const Hdf5Dataset dataset = Hdf5Dataset::fromImage(bytes, "in-memory.h5");
  const Gathered g = gatherAll(dataset, {1});
  EXPECT_EQ(g.images, expectedSample(pixels, 1, {1, 2, 2}));
  EXPECT_EQ(g.labels, std::vector<std::int32_t>{1});
}

// A file as h5py writes it: int64 labels, an int64 attribute, a variable-length string source
// and no ringtrain_layout attribute.
TEST(Hdf5DatasetTest, ReadsAnH5pyStyleFile) {
  TempFolder folder;
  {
    RawHdf5File file(folder / "h5py.h5");
    const std::vector<std::uint8_t> images(2 * 2 * 2 * 1, 255);
    const std::vector<std::int64_t> labels = {4, 0};
    file.dataset("images", H5T_STD_U8LE, {2, 2, 2, 1}, H5T_NATIVE_UINT8, images.data());
    file.dataset("labels", H5T_STD_I64LE, {2}, H5T_NATIVE_INT64, labels.data());
    file.integerAttribute("num_classes", 5);
    file.variableStringAttribute("source", "made by h5py");
  }
  const Hdf5Dataset dataset(folder / "h5py.h5");
  EXPECT_EQ(dataset.source(), "made by h5py");
  const Gathered g = gatherAll(dataset, {0, 1});
  EXPECT_EQ(g.labels, (std::vector<std::int32_t>{4, 0}));
  EXPECT_EQ(g.images, std::vector<float>(8, 1.0f));
}

TEST(Hdf5DatasetTest, IdxToHdf5ConvertsMnistFilesSampleForSample) {
  TempFolder folder;
  const auto pixels = patternBytes(6, {1, 5, 4});
  const std::vector<std::uint8_t> labels = {9, 0, 3, 3, 7, 1};
  std::filesystem::create_directory(folder / "mnist");
  writeIdxImages(folder / "mnist/train-images-idx3-ubyte.gz", 6, 5, 4, pixels);
  writeIdxLabels(folder / "mnist/train-labels-idx1-ubyte.gz", labels);
  writeIdxImages(folder / "mnist/t10k-images-idx3-ubyte", 2, 5, 4, std::span(pixels).first(40));
  writeIdxLabels(folder / "mnist/t10k-labels-idx1-ubyte", std::span(labels).first(2));
  const std::string command = std::string(RINGTRAIN_IDX_TO_HDF5) + " --mnist " +
                              (folder / "mnist").string() + " " + (folder / "h5").string() +
                              " > /dev/null";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;

  const DatasetPair idx = loadMnist(folder / "mnist");
  const DatasetPair h5 = loadHdf5Pair(folder / "h5/train.h5", folder / "h5/test.h5");
  const std::vector<std::int64_t> all = {0, 1, 2, 3, 4, 5};
  const Gathered a = gatherAll(*idx.train, all);
  const Gathered b = gatherAll(*h5.train, all);
  EXPECT_EQ(a.images, b.images);
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_EQ(h5.test->size(), 2);
  EXPECT_THAT(h5.train->describe(), HasSubstr("train-images-idx3-ubyte.gz"));
}

TEST(Hdf5DatasetTest, IdxToHdf5ReportsABadInputInOneLine) {
  TempFolder folder;
  const std::string command = std::string(RINGTRAIN_IDX_TO_HDF5) + " " +
                              (folder / "none").string() + " " + (folder / "none2").string() + " " +
                              (folder / "out.h5").string() + " 2> " + (folder / "err").string();
  const int status = std::system(command.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 1);
  const auto err = testing::readRaw(folder / "err");
  EXPECT_EQ(std::string(err.begin(), err.end()),
            "idx_to_hdf5: error: " + (folder / "none").string() + ": no such file\n");
}

// ---- Files that break the layout ---------------------------------------------------------------

// The parts of a file the error cases vary, each valid by default.
struct Parts {
  bool images = true;
  bool labels = true;
  hid_t imageType = H5T_STD_U8LE;
  std::vector<hsize_t> imageDims = {3, 2, 2, 1};
  hid_t labelType = H5T_STD_I32LE;
  std::vector<hsize_t> labelDims = {3};
  std::vector<std::int32_t> labelValues = {0, 1, 2};
  std::vector<hsize_t> imageChunk;
  bool numClasses = true;
  bool floatClasses = false;
  std::int64_t classes = 3;
  std::int64_t layout = 1;
};

std::filesystem::path writeParts(const TempFolder& folder, const Parts& p) {
  const auto path = folder / "bad.h5";
  RawHdf5File file(path);
  if (p.images) file.dataset("images", p.imageType, p.imageDims, -1, nullptr, p.imageChunk);
  if (p.labels) {
    const bool fill = p.labelDims.size() == 1 && p.labelDims[0] == p.labelValues.size() &&
                      H5Tget_class(p.labelType) == H5T_INTEGER;
    file.dataset("labels", p.labelType, p.labelDims, H5T_NATIVE_INT32,
                 fill ? p.labelValues.data() : nullptr);
  }
  if (p.numClasses && p.floatClasses) file.floatAttribute("num_classes", 3.0);
  if (p.numClasses && !p.floatClasses) file.integerAttribute("num_classes", p.classes);
  file.integerAttribute("ringtrain_layout", p.layout);
  return path;
}

std::string openError(const TempFolder& folder, const Parts& parts) {
  const auto path = writeParts(folder, parts);
  return dataErrorOf([&] { Hdf5Dataset dataset(path); });
}

TEST(Hdf5DatasetErrorTest, ValidPartsOpen) {
  TempFolder folder;
  EXPECT_NO_THROW(Hdf5Dataset(writeParts(folder, Parts{})));
}

TEST(Hdf5DatasetErrorTest, MissingFile) {
  TempFolder folder;
  EXPECT_EQ(dataErrorOf([&] { Hdf5Dataset d(folder / "none.h5"); }),
            (folder / "none.h5").string() + ": no such file");
}

TEST(Hdf5DatasetErrorTest, NotHdf5) {
  TempFolder folder;
  const std::vector<std::uint8_t> text = {'h', 'e', 'l', 'l', 'o', '\n'};
  testing::writeRaw(folder / "text.h5", text);
  EXPECT_EQ(dataErrorOf([&] { Hdf5Dataset d(folder / "text.h5"); }),
            (folder / "text.h5").string() + ": not an HDF5 file (no HDF5 signature)");
}

TEST(Hdf5DatasetErrorTest, TruncatedFile) {
  TempFolder folder;
  writeHdf5Dataset(folder / "d.h5", specOf({1, 8, 8}, 20, 2), patternBytes(20, {1, 8, 8}),
                   std::vector<std::int32_t>(20, 1));
  auto bytes = testing::readRaw(folder / "d.h5");
  bytes.resize(bytes.size() / 2);
  testing::writeRaw(folder / "d.h5", bytes);
  const std::string message = dataErrorOf([&] { Hdf5Dataset d(folder / "d.h5"); });
  EXPECT_THAT(message, StartsWith((folder / "d.h5").string() +
                                  ": cannot open the HDF5 file (HDF5: H5Fopen: unable to open "
                                  "file: truncated file: eof = "));
}

TEST(Hdf5DatasetErrorTest, MissingImages) {
  TempFolder folder;
  Parts p;
  p.images = false;
  EXPECT_EQ(openError(folder, p),
            (folder / "bad.h5").string() +
                ": no dataset /images (the layout: /images N x H x W x C, /labels N, attribute "
                "num_classes)");
}

TEST(Hdf5DatasetErrorTest, MissingLabels) {
  TempFolder folder;
  Parts p;
  p.labels = false;
  EXPECT_THAT(openError(folder, p), HasSubstr("bad.h5: no dataset /labels (the layout"));
}

TEST(Hdf5DatasetErrorTest, ImagesWithoutChannels) {
  TempFolder folder;
  Parts p;
  p.imageDims = {3, 28, 28};
  EXPECT_EQ(openError(folder, p), (folder / "bad.h5").string() +
                                      ": /images has 3 dimensions (3x28x28); expected 4 (N x H "
                                      "x W x C)");
}

TEST(Hdf5DatasetErrorTest, LabelsOfTwoDimensions) {
  TempFolder folder;
  Parts p;
  p.labelDims = {3, 1};
  EXPECT_EQ(openError(folder, p),
            (folder / "bad.h5").string() + ": /labels has 2 dimensions (3x1); expected 1 (N)");
}

TEST(Hdf5DatasetErrorTest, MismatchedCounts) {
  TempFolder folder;
  Parts p;
  p.labelDims = {2};
  p.labelValues = {0, 1};
  EXPECT_EQ(openError(folder, p),
            (folder / "bad.h5").string() + ": /images holds 3 samples but /labels holds 2 labels");
}

TEST(Hdf5DatasetErrorTest, UnsupportedImageType) {
  TempFolder folder;
  Parts p;
  p.imageType = H5T_STD_I16LE;
  EXPECT_EQ(openError(folder, p),
            (folder / "bad.h5").string() + ": /images has type int16; expected uint8 or float32");
}

TEST(Hdf5DatasetErrorTest, FloatLabels) {
  TempFolder folder;
  Parts p;
  p.labelType = H5T_IEEE_F32LE;
  EXPECT_EQ(openError(folder, p),
            (folder / "bad.h5").string() + ": /labels has type float32; expected an integer type");
}

TEST(Hdf5DatasetErrorTest, NoNumberOfClasses) {
  TempFolder folder;
  Parts p;
  p.numClasses = false;
  EXPECT_THAT(openError(folder, p),
              HasSubstr("bad.h5: no attribute num_classes on the root group"));
}

TEST(Hdf5DatasetErrorTest, ZeroClasses) {
  TempFolder folder;
  Parts p;
  p.classes = 0;
  EXPECT_EQ(openError(folder, p),
            (folder / "bad.h5").string() +
                ": attribute num_classes is 0; expected a number of classes from 1 to 2^31-1");
}

TEST(Hdf5DatasetErrorTest, FloatNumberOfClasses) {
  TempFolder folder;
  Parts p;
  p.floatClasses = true;
  EXPECT_EQ(openError(folder, p), (folder / "bad.h5").string() +
                                      ": attribute num_classes is a float64; expected an integer");
}

TEST(Hdf5DatasetErrorTest, AnotherLayoutVersion) {
  TempFolder folder;
  Parts p;
  p.layout = 2;
  EXPECT_EQ(openError(folder, p), (folder / "bad.h5").string() +
                                      ": attribute ringtrain_layout is 2; this ringtrain reads "
                                      "layout 1");
}

TEST(Hdf5DatasetErrorTest, ChunksTooLargeToRead) {
  TempFolder folder;
  Parts p;
  p.imageDims = {3, 4096, 4096, 3};
  p.imageChunk = {2, 4096, 4096, 3};
  EXPECT_EQ(openError(folder, p), (folder / "bad.h5").string() +
                                      ": /images is stored in chunks of 2x4096x4096x3 values "
                                      "(100663296 bytes); at most 64 MiB per chunk are read");
}

// 2^40 bytes of samples that were never written: HDF5 stores nothing for them, so the file is a
// few kilobytes, and neither the reader (labels) nor its caller (batches, a sampler over N
// indices) may allocate on the word of those dimensions.
TEST(Hdf5DatasetErrorTest, MoreSamplesThanTheFileCanHold) {
  TempFolder folder;
  Parts p;
  p.imageDims = {hsize_t{1} << 20, 1024, 1024, 1};
  p.labelDims = {hsize_t{1} << 20};
  const std::string message = openError(folder, p);
  EXPECT_THAT(message, StartsWith((folder / "bad.h5").string() +
                                  ": /images claims 1048576x1024x1024x1 uint8 values "
                                  "(1099511627776 bytes), more than a file of "));
  EXPECT_THAT(message, ::testing::EndsWith(" bytes can hold even compressed"));
}

TEST(Hdf5DatasetErrorTest, LabelOutOfRange) {
  TempFolder folder;
  Parts p;
  p.labelValues = {0, 7, 2};
  EXPECT_EQ(openError(folder, p),
            (folder / "bad.h5").string() +
                ": label 7 of sample 1 is out of range: 3 classes take labels 0 to 2");
}

TEST(Hdf5DatasetErrorTest, LabelsBeyondInt32AreOutOfRangeToo) {
  TempFolder folder;
  const std::vector<std::int64_t> labels = {0, std::int64_t{1} << 40, 1};
  {
    RawHdf5File file(folder / "big.h5");
    file.dataset("images", H5T_STD_U8LE, {3, 1, 1, 1});
    file.dataset("labels", H5T_STD_I64LE, {3}, H5T_NATIVE_INT64, labels.data());
    file.integerAttribute("num_classes", 2);
  }
  EXPECT_THAT(dataErrorOf([&] { Hdf5Dataset d(folder / "big.h5"); }),
              HasSubstr("big.h5: label 2147483647 of sample 1 is out of range"));
}

TEST(Hdf5DatasetErrorTest, TestSetOfAnotherShape) {
  TempFolder folder;
  writeHdf5Dataset(folder / "train.h5", specOf({1, 2, 2}, 1, 2), patternBytes(1, {1, 2, 2}),
                   std::vector<std::int32_t>{0});
  writeHdf5Dataset(folder / "test.h5", specOf({1, 2, 3}, 1, 2), patternBytes(1, {1, 2, 3}),
                   std::vector<std::int32_t>{0});
  EXPECT_EQ(dataErrorOf([&] { loadHdf5Pair(folder / "train.h5", folder / "test.h5"); }),
            (folder / "test.h5").string() + ": samples are 1x2x3 but " +
                (folder / "train.h5").string() + " has 1x2x2");
}

}  // namespace
}  // namespace ringtrain::data
