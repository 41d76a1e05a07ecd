// libFuzzer target: the HDF5 dataset reader (data/hdf5_dataset.h) on arbitrary bytes, opened
// from memory with HDF5's core driver, then asked for a batch when it opens. Any answer but a
// FormatError (DataError is one) is a finding (in our code or in libhdf5 underneath it: both are
// reported), and so is an HDF5 object left open afterwards.
#include <cstdint>
#include <span>
#include <vector>

#include "data/hdf5_dataset.h"
#include "formats/format_error.h"
#include "tests/storage/fuzz/fuzz_target.h"
#include "tests/storage/fuzz/hdf5_open_objects.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const auto dataset =
        ringtrain::data::Hdf5Dataset::fromImage(std::span(data, size), "fuzz-input.h5");
    const std::int64_t elements = dataset.sampleShape().elements();
    // A claimed sample size is legitimate up to 2^28 values; the batch buffers are the caller's,
    // so keep them small here.
    if (elements > (1 << 16)) return 0;
    const std::int64_t n = dataset.size();
    const std::vector<std::int64_t> indices = {n - 1, 0, n / 2, n / 2 + 1 < n ? n / 2 + 1 : 0, 0};
    std::vector<float> images(indices.size() * static_cast<std::size_t>(elements));
    std::vector<std::int32_t> labels(indices.size());
    dataset.gather(indices, images.data(), labels.data());
  } catch (const ringtrain::formats::FormatError&) {
  }
  abortIfHdf5ObjectsOpen("Hdf5Dataset");
  return 0;
}
