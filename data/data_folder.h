// What `ringtrain train --data FOLDER` reads: the train/test pair a folder holds.
#pragma once

#include <cstdint>
#include <filesystem>

#include "data/dataset.h"

namespace ringtrain::data {

// What a token model needs to read a folder of token files; the defaults (both 0) mean "not a
// token model".
struct TokenOptions {
  std::int64_t context = 0;
  int vocabulary = 0;
  bool given() const { return context != 0 || vocabulary != 0; }
};

// The pair in `folder`, by what it holds:
//   - train.h5 and test.h5 in ringtrain's HDF5 layout (hdf5_dataset.h; idx_to_hdf5 --mnist
//     writes them) when train.h5 is there;
//   - else token files (token_file.h) when a file named *train.bin or *val.bin is there: exactly
//     one of each is needed (llm.c's naming: fortunes_train.bin, fortunes_val.bin), read as
//     TokenDatasets of `tokens.context` and `tokens.vocabulary`, the *val.bin one as the test set;
//   - else MNIST's four IDX files (loadMnist).
// Throws DataError naming the folder or file: no such folder, test.h5 missing beside train.h5, a
// token folder without `tokens` (or with only one of the two), an image folder with them, and
// every reader's errors.
DatasetPair loadDataFolder(const std::filesystem::path& folder, const TokenOptions& tokens = {});

// "hdf5", "tokens" or "idx": which of the above loadDataFolder would read.
const char* dataFolderFormat(const std::filesystem::path& folder);

}  // namespace ringtrain::data
