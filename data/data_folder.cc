#include "data/data_folder.h"

#include <algorithm>
#include <string>
#include <system_error>
#include <vector>

#include "data/data_error.h"
#include "data/hdf5_dataset.h"
#include "data/idx_dataset.h"
#include "data/token_dataset.h"
#include "data/token_file.h"
#include "formats/separate_check.h"

namespace ringtrain::data {
namespace {

constexpr const char* kTrainSuffix = "train.bin";
constexpr const char* kValidationSuffix = "val.bin";
constexpr const char* kTokenFolderHint =
    "data/prepare_fortunes.sh writes fortunes_train.bin and fortunes_val.bin";

// The entries of `folder` other than folders whose names end in `suffix`, sorted; none when it is
// no folder. A FIFO or device of such a name is listed, for its reader to refuse by name.
std::vector<std::filesystem::path> filesEndingIn(const std::filesystem::path& folder,
                                                 const std::string& suffix) {
  std::vector<std::filesystem::path> found;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(folder, ec), end; !ec && it != end;
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.ends_with(suffix) && !it->is_directory(ec)) found.push_back(it->path());
  }
  std::sort(found.begin(), found.end());
  return found;
}

std::string namesOf(const std::vector<std::filesystem::path>& files) {
  std::string names;
  for (const auto& file : files)
    names += (names.empty() ? "" : ", ") + file.filename().string();
  return names.empty() ? "none" : names;
}

std::filesystem::path theOne(const std::filesystem::path& folder, const std::string& suffix) {
  const auto files = filesEndingIn(folder, suffix);
  if (files.size() != 1) {
    throw DataError(folder.string() + ": holds " + std::to_string(files.size()) +
                    " files named *" + suffix + " (" + namesOf(files) +
                    "); a token folder needs exactly one *" + kTrainSuffix + " and one *" +
                    kValidationSuffix + " (" + kTokenFolderHint + ")");
  }
  return files.front();
}

void checkTokenOptions(const std::filesystem::path& folder, const TokenOptions& tokens) {
  if (!tokens.given()) {
    throw DataError(folder.string() + ": holds token files, which only a token model reads " +
                    "(one with a context length and a vocabulary)");
  }
  if (tokens.context < 1 || tokens.vocabulary < 1 || tokens.vocabulary > kMaxTokenVocabulary) {
    throw DataError(folder.string() + ": token files need a context length of at least 1 and " +
                    "a vocabulary in [1, " + std::to_string(kMaxTokenVocabulary) +
                    "], not context " + std::to_string(tokens.context) + " and vocabulary " +
                    std::to_string(tokens.vocabulary));
  }
}

DatasetPair loadTokenFolder(const std::filesystem::path& folder, const TokenOptions& tokens) {
  const std::filesystem::path train = theOne(folder, kTrainSuffix);
  const std::filesystem::path validation = theOne(folder, kValidationSuffix);
  checkTokenOptions(folder, tokens);
  DatasetPair pair;
  pair.train = std::make_unique<TokenDataset>(train, tokens.context, tokens.vocabulary);
  pair.test = std::make_unique<TokenDataset>(validation, tokens.context, tokens.vocabulary);
  return pair;
}

// A token model asked to read images: said before any image is read.
[[noreturn]] void failImagesForTokens(const std::filesystem::path& folder,
                                      const TokenOptions& tokens) {
  std::error_code ec;
  if (!std::filesystem::is_directory(folder, ec)) {
    throw DataError(folder.string() + ": no such folder (" + kTokenFolderHint + ")");
  }
  throw DataError(folder.string() + ": holds no token files (*" + kTrainSuffix + " and *" +
                  kValidationSuffix + "), but a token model (context " +
                  std::to_string(tokens.context) + ", vocabulary " +
                  std::to_string(tokens.vocabulary) + ") is to read it");
}

DatasetPair loadHdf5Folder(const std::filesystem::path& folder) {
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
  formats::checkInSeparateProcess("hdf5-dataset-quick", folder / "train.h5");
  formats::checkInSeparateProcess("hdf5-dataset-quick", test);
  return loadHdf5Pair(folder / "train.h5", test);
}

}  // namespace

const char* dataFolderFormat(const std::filesystem::path& folder) {
  std::error_code ec;
  if (std::filesystem::exists(folder / "train.h5", ec)) return "hdf5";
  if (!filesEndingIn(folder, kTrainSuffix).empty() ||
      !filesEndingIn(folder, kValidationSuffix).empty()) {
    return "tokens";
  }
  return "idx";
}

DatasetPair loadDataFolder(const std::filesystem::path& folder, const TokenOptions& tokens) {
  const std::string_view format = dataFolderFormat(folder);
  if (format == "tokens") return loadTokenFolder(folder, tokens);
  if (tokens.given()) failImagesForTokens(folder, tokens);
  if (format == "idx") return loadMnist(folder);
  return loadHdf5Folder(folder);
}

}  // namespace ringtrain::data
