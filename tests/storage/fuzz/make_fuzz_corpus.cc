// make_fuzz_corpus OUT: writes the seed corpus of the storage fuzz targets -- small valid inputs
// each reader accepts -- into OUT/idx_reader, OUT/hdf5_dataset, OUT/checkpoint, OUT/token_file
// and OUT/safetensors. libFuzzer
// mutates them; starting from valid files gets it past the magic numbers and headers at once.
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "data/hdf5_dataset.h"
#include "data/idx_writer.h"
#include "data/token_file.h"
#include "formats/file_bytes.h"
#include "storage/checkpoint.h"
#include "storage/safetensors.h"

namespace {

namespace fs = std::filesystem;
using ringtrain::data::Hdf5DatasetSpec;
using ringtrain::data::PixelType;

void writeBytes(const fs::path& path, const std::vector<std::uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

std::vector<std::uint8_t> pattern(std::size_t n) {
  std::vector<std::uint8_t> bytes(n);
  for (std::size_t i = 0; i < n; ++i)
    bytes[i] = static_cast<std::uint8_t>(i * 29 + 3);
  return bytes;
}

void idxSeeds(const fs::path& dir) {
  writeBytes(dir / "images-3x4x4", ringtrain::data::encodeIdxImages(3, 4, 4, pattern(48)));
  writeBytes(dir / "labels-5",
             ringtrain::data::encodeIdxLabels(std::vector<std::uint8_t>{0, 9, 3, 3, 7}));
  // The same images gzip-compressed: the target also reads every input under a .gz name.
  ringtrain::data::writeIdxImages(dir / "images-2x3x3.gz", 2, 3, 3, pattern(18));
  // Two forged .gz files the reader must refuse without inflating them: a header that claims more
  // than deflate can expand the file to, and one image followed by a megabyte of zeros (a small
  // gzip bomb, about a kilobyte compressed).
  auto claimsMore = ringtrain::data::encodeIdxLabels(std::vector<std::uint8_t>{1, 2, 3});
  claimsMore[5] = 0x10;  // the count: 3 becomes 0x00100003 (1,048,579) labels
  ringtrain::formats::writeFileAtomically(dir / "labels-claiming-1m.gz", claimsMore);
  auto bomb = ringtrain::data::encodeIdxImages(1, 4, 4, pattern(16));
  bomb.resize(bomb.size() + (1 << 20), 0);
  ringtrain::formats::writeFileAtomically(dir / "images-1x4x4-then-zeros.gz", bomb);
}

void hdf5Seeds(const fs::path& dir) {
  Hdf5DatasetSpec spec;
  spec.shape = {1, 4, 4};
  spec.count = 3;
  spec.numClasses = 10;
  spec.source = "seed";
  ringtrain::data::writeHdf5Dataset(dir / "uint8-contiguous.h5", spec, pattern(48),
                                    std::vector<std::int32_t>{0, 9, 5});
  spec.compressionLevel = 6;
  spec.chunkSamples = 2;
  ringtrain::data::writeHdf5Dataset(dir / "uint8-deflate.h5", spec, pattern(48),
                                    std::vector<std::int32_t>{1, 2, 3});
  spec = {};
  spec.shape = {3, 2, 2};
  spec.pixelType = PixelType::kFloat32;
  spec.count = 2;
  spec.numClasses = 2;
  ringtrain::data::Hdf5DatasetWriter writer(dir / "float32-rgb.h5", spec);
  std::vector<float> pixels(24);
  for (std::size_t i = 0; i < pixels.size(); ++i)
    pixels[i] = static_cast<float>(i) / 24.0f;
  writer.append(pixels, std::vector<std::int32_t>{1, 0});
  writer.finish();
}

void checkpointSeeds(const fs::path& dir) {
  ringtrain::storage::CheckpointContent c;
  c.step = 40;
  c.epoch = 1;
  c.sampler = {1, 3};
  c.seed = 42;
  c.rngState = {7, 8};
  c.worldSize = 2;
  c.batchSize = 4;
  c.optimizerKind = "sgd";
  c.optimizerSteps = 40;
  c.config = "batch-size = 4\nmodel = mlp\n";
  c.modelLayout = "model layout\n";
  c.parameters = {{"fc1.weight", {2, 3}, {1, 2, 3, 4, 5, 6}}, {"fc1.bias", {2}, {0.5f, -0.5f}}};
  c.optimizerState = {{"momentum", {8}, {0, 1, 2, 3, 4, 5, 6, 7}}};
  writeBytes(dir / "sgd.ckpt", ringtrain::storage::encodeCheckpoint(c));
  c.optimizerKind = "adam";
  c.optimizerState.push_back({"exp_avg_sq", {8}, std::vector<float>(8, 0.25f)});
  c.optimizerState[0].name = "exp_avg";
  c.rngState.clear();
  writeBytes(dir / "adam.ckpt", ringtrain::storage::encodeCheckpoint(c));
}

// Token files of 0, 5 and 40 tokens (the last with GPT-2's <|endoftext|>, 50256).
void tokenFileSeeds(const fs::path& dir) {
  std::vector<std::uint16_t> tokens;
  writeBytes(dir / "empty.bin", ringtrain::data::encodeTokenFile(tokens));
  tokens = {15496, 995, 13, 198, 50256};
  writeBytes(dir / "tokens-5.bin", ringtrain::data::encodeTokenFile(tokens));
  tokens.clear();
  for (int i = 0; i < 40; ++i)
    tokens.push_back(static_cast<std::uint16_t>(i * 1237 % 50257));
  writeBytes(dir / "tokens-40.bin", ringtrain::data::encodeTokenFile(tokens));
}

// A GPT-like pair of tensors with metadata, and a file of one scalar without.
void safetensorsSeeds(const fs::path& dir) {
  ringtrain::storage::SafetensorsContent c;
  c.metadata = {{"format", "pt"}, {"ringtrain_step", "3"}};
  c.tensors = {{"wte.weight", {3, 2}, {1, 2, 3, 4, 5, 6}}, {"h.0.ln_1.bias", {2}, {0.5f, -0.5f}}};
  writeBytes(dir / "two.safetensors", ringtrain::storage::encodeSafetensors(c));
  c.metadata.clear();
  c.tensors = {{"scalar", {}, {7}}};
  writeBytes(dir / "scalar.safetensors", ringtrain::storage::encodeSafetensors(c));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_fuzz_corpus OUT\n");
    return 2;
  }
  try {
    const fs::path out = argv[1];
    for (const char* kind :
         {"idx_reader", "hdf5_dataset", "checkpoint", "token_file", "safetensors"})
      fs::create_directories(out / kind);
    idxSeeds(out / "idx_reader");
    hdf5Seeds(out / "hdf5_dataset");
    checkpointSeeds(out / "checkpoint");
    tokenFileSeeds(out / "token_file");
    safetensorsSeeds(out / "safetensors");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_fuzz_corpus: error: %s\n", e.what());
    return 1;
  }
}
