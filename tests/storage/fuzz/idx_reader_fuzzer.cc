// libFuzzer target: the IDX reader (data/idx_reader.h) on arbitrary bytes, as a plain file and as
// a .gz file. The reader opens files by name, so each input is written to a folder of its own in
// /dev/shm (memory, when there is one). Any answer but a FormatError (DataError is one) -- a
// crash, a sanitizer report, another exception, an allocation above libFuzzer's limit -- is a
// finding.
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

#include "data/idx_reader.h"
#include "formats/format_error.h"
#include "tests/storage/fuzz/fuzz_target.h"

namespace {

namespace fs = std::filesystem;

const fs::path& workFolder() {
  static const fs::path folder = [] {
    const fs::path base =
        fs::is_directory("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
    std::string pattern = (base / "ringtrain_idx_fuzz_XXXXXX").string();
    if (!mkdtemp(pattern.data())) std::abort();
    std::atexit([] {
      std::error_code ignored;
      fs::remove_all(workFolder(), ignored);
    });
    return fs::path(pattern);
  }();
  return folder;
}

void writeInput(const fs::path& path, const std::uint8_t* data, std::size_t size) {
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (!file || std::fwrite(data, 1, size, file) != size || std::fclose(file) != 0) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  for (const char* name : {"input-idx", "input-idx.gz"}) {
    const fs::path path = workFolder() / name;
    writeInput(path, data, size);
    try {
      ringtrain::data::readIdxImages(path);
    } catch (const ringtrain::formats::FormatError&) {
    }
    try {
      ringtrain::data::readIdxLabels(path, 10);
    } catch (const ringtrain::formats::FormatError&) {
    }
  }
  return 0;
}
