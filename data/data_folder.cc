#include "data/data_folder.h"

#include <system_error>

#include "data/data_error.h"
#include "data/hdf5_dataset.h"
#include "data/idx_dataset.h"
#include "data/separate_check.h"

namespace ringtrain::data {

const char* dataFolderFormat(const std::filesystem::path& folder) {
  std::error_code ec;
  return std::filesystem::exists(folder / "train.h5", ec) ? "hdf5" : "idx";
}

DatasetPair loadDataFolder(const std::filesystem::path& folder) {
  if (std::string_view(dataFolderFormat(folder)) == "idx") return loadMnist(folder);
  const std::filesystem::path test = folder / "test.h5";
  std::error_code ec;
  if (!std::filesystem::exists(test, ec)) {
    throw DataError(test.string() + ": not found (" + (folder / "train.h5").string() +
                    " is there, and an HDF5 dataset needs both; idx_to_hdf5 --mnist writes the "
                    "pair)");
  }
  // A forged file can crash libhdf5 (separate_check.h): each is read first in a child process,
  // quickly (the layout and three samples): reading every chunk would read the whole data set on
  // every rank at every start.
  checkInSeparateProcess("hdf5-dataset-quick", folder / "train.h5");
  checkInSeparateProcess("hdf5-dataset-quick", test);
  return loadHdf5Pair(folder / "train.h5", test);
}

}  // namespace ringtrain::data
