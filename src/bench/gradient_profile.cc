#include "src/bench/gradient_profile.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

#include "base/file_checks.h"

namespace ringtrain::bench {
namespace {

// "1000x2048" -> {1000, 2048}; empty on any bad dimension.
std::vector<std::int64_t> parseShape(const std::string& text) {
  std::vector<std::int64_t> shape;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find('x', start), text.size());
    std::int64_t value = 0;
    const auto [rest, error] = std::from_chars(text.data() + start, text.data() + end, value);
    if (error != std::errc() || rest != text.data() + end || value < 1) return {};
    shape.push_back(value);
    start = end + 1;
  }
  return shape;
}

ProfileTensor parseLine(const std::string& line) {
  std::istringstream fields(line);
  std::string name, shapeText, flopsText, extra;
  if (!(fields >> name >> shapeText >> flopsText) || (fields >> extra))
    throw std::runtime_error("expected 'name shape flops-per-sample'");
  ProfileTensor tensor{name, parseShape(shapeText), 0};
  if (tensor.shape.empty())
    throw std::runtime_error(
        fmt::format("shape '{}': expected positive sizes like 1000x2048", shapeText));
  std::size_t used = 0;
  try {
    tensor.flopsPerSample = std::stod(flopsText, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != flopsText.size() || !std::isfinite(tensor.flopsPerSample) ||
      tensor.flopsPerSample < 0)
    throw std::runtime_error(fmt::format("flops '{}': expected a number, at least 0", flopsText));
  return tensor;
}

}  // namespace

std::int64_t ProfileTensor::count() const {
  std::int64_t product = 1;
  for (const std::int64_t d : shape)
    product *= d;
  return product;
}

std::int64_t GradientProfile::parameters() const {
  std::int64_t total = 0;
  for (const ProfileTensor& t : tensors)
    total += t.count();
  return total;
}

double GradientProfile::flopsPerSample() const {
  double total = 0;
  for (const ProfileTensor& t : tensors)
    total += t.flopsPerSample;
  return total;
}

GradientProfile readProfile(const std::filesystem::path& file) {
  if (auto problem = base::regularFileProblem(file)) {
    throw std::runtime_error(fmt::format("profile {}: {}", file.string(), *problem));
  }
  std::ifstream in(file);
  if (!in) throw std::runtime_error(fmt::format("profile {}: cannot open the file", file.string()));
  GradientProfile profile{file.stem().string(), {}};
  std::set<std::string> names;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    const auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#') continue;
    try {
      ProfileTensor tensor = parseLine(line);
      if (!names.insert(tensor.name).second)
        throw std::runtime_error(fmt::format("tensor {} was listed already", tensor.name));
      profile.tensors.push_back(std::move(tensor));
    } catch (const std::runtime_error& e) {
      throw std::runtime_error(
          fmt::format("profile {} line {}: {}", file.string(), number, e.what()));
    }
  }
  if (profile.tensors.empty())
    throw std::runtime_error(fmt::format("profile {}: no tensor in the file", file.string()));
  return profile;
}

ProfileFolder profileFolder(const std::filesystem::path& program, const char* variable) {
  if (variable != nullptr && *variable != '\0') return {variable, kProfileDirVariable};
  return {program.parent_path().parent_path() / "share" / "ringtrain" / "profiles",
          "beside the program " + program.string()};
}

std::filesystem::path profileFile(const std::string& nameOrFile, const ProfileFolder& folder) {
  const bool isPath = nameOrFile.find('/') != std::string::npos ||
                      std::filesystem::path(nameOrFile).extension() == ".txt";
  if (isPath) return nameOrFile;
  if (auto problem = base::folderProblem(folder.path)) {
    throw std::runtime_error(fmt::format(
        "--profile {}: looked in {} ({}): {}; set {} to a folder of NAME.txt profiles (the "
        "checkout's bench/profiles), or give a profile file's path",
        nameOrFile, folder.path.string(), folder.origin, *problem, kProfileDirVariable));
  }
  const std::filesystem::path file = folder.path / (nameOrFile + ".txt");
  std::error_code error;
  if (std::filesystem::exists(file, error)) return file;  // readProfile refuses a FIFO, say
  std::vector<std::string> known;
  for (const auto& entry : std::filesystem::directory_iterator(folder.path, error)) {
    if (entry.path().extension() == ".txt") known.push_back(entry.path().stem().string());
  }
  std::sort(known.begin(), known.end());
  throw std::runtime_error(fmt::format(
      "--profile {}: no such profile in {} ({}; known: {}; or give a profile file's path)",
      nameOrFile, folder.path.string(), folder.origin,
      known.empty() ? "none" : fmt::format("{}", fmt::join(known, ", "))));
}

}  // namespace ringtrain::bench
