// What `ringtrain train --data FOLDER` reads: the train/test pair a folder holds.
#pragma once

#include <filesystem>

#include "data/dataset.h"

namespace ringtrain::data {

// train.h5 and test.h5 in ringtrain's HDF5 layout (hdf5_dataset.h; idx_to_hdf5 --mnist writes
// them) when train.h5 is there, else MNIST's four IDX files (loadMnist). Throws DataError naming
// the folder or file: no such folder, test.h5 missing beside train.h5, and every reader's errors.
DatasetPair loadDataFolder(const std::filesystem::path& folder);

// "hdf5" when loadDataFolder would read train.h5/test.h5, else "idx".
const char* dataFolderFormat(const std::filesystem::path& folder);

}  // namespace ringtrain::data
