#include "storage/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

#include "base/file_checks.h"
#include "base/read_exactly.h"
#include "formats/durable_io.h"

namespace ringtrain::storage {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian: this code copies floats as they are in memory");

constexpr std::size_t kLengthBytes = 8;
constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;  // the reference implementation's limit
constexpr const char* kMetadataKey = "__metadata__";

[[noreturn]] void fail(const fs::path& file, const std::string& what) {
  throw CheckpointError(file.string() + ": " + what);
}

std::uint64_t valueCount(const std::vector<std::int64_t>& shape) {
  std::uint64_t count = 1;
  for (const std::int64_t d : shape)
    count *= static_cast<std::uint64_t>(d);
  return count;
}

nlohmann::ordered_json tensorHeader(const Tensor& t, std::uint64_t begin) {
  return {{"dtype", "F32"},
          {"shape", t.shape},
          {"data_offsets", {begin, begin + t.values.size() * sizeof(float)}}};
}

std::uint64_t offsetAt(const json& offsets, std::size_t i) {
  return offsets.at(i).get<std::uint64_t>();
}

SafetensorsEntry parseEntry(const std::string& name, const json& info, std::uint64_t dataBytes,
                            const fs::path& file) {
  const std::string where = "tensor " + name;
  if (!info.is_object()) fail(file, where + ": not a JSON object");
  const auto dtype = info.find("dtype");
  const auto shape = info.find("shape");
  const auto offsets = info.find("data_offsets");
  if (dtype == info.end() || !dtype->is_string()) fail(file, where + ": no dtype");
  if (*dtype != "F32") {
    fail(file, where + " is " + dtype->get<std::string>() + "; ringtrain reads F32 tensors only");
  }
  if (shape == info.end() || !shape->is_array()) fail(file, where + ": no shape");
  if (offsets == info.end() || !offsets->is_array() || offsets->size() != 2 ||
      !(*offsets)[0].is_number_unsigned() || !(*offsets)[1].is_number_unsigned()) {
    fail(file, where + ": data_offsets is not [begin, end]");
  }
  SafetensorsEntry entry{name, {}, offsetAt(*offsets, 0), offsetAt(*offsets, 1)};
  std::uint64_t count = 1;
  for (const json& d : *shape) {
    if (!d.is_number_unsigned()) fail(file, where + ": shape " + shape->dump() + " is not sizes");
    const auto size = d.get<std::uint64_t>();
    // Bounded by the data: no product overflows before it is refused.
    if (size != 0 && count > dataBytes / sizeof(float) / size) {
      fail(file, where + ": shape " + shape->dump() + " is larger than the file's data");
    }
    count *= size;
    entry.shape.push_back(static_cast<std::int64_t>(size));
  }
  if (entry.begin > entry.end || entry.end > dataBytes) {
    fail(file, where + ": data_offsets " + offsets->dump() + " outside the " +
                   std::to_string(dataBytes) + " bytes of data");
  }
  if (entry.end - entry.begin != count * sizeof(float)) {
    fail(file, where + ": data_offsets " + offsets->dump() + " hold " +
                   std::to_string(entry.end - entry.begin) + " bytes but shape " + shape->dump() +
                   " of F32 needs " + std::to_string(count * sizeof(float)));
  }
  return entry;
}

std::map<std::string, std::string> parseMetadata(const json& metadata, const fs::path& file) {
  if (!metadata.is_object()) fail(file, "__metadata__ is not a JSON object");
  std::map<std::string, std::string> result;
  for (const auto& [key, value] : metadata.items()) {
    if (!value.is_string()) fail(file, "__metadata__ value of " + key + " is not a string");
    result[key] = value.get<std::string>();
  }
  return result;
}

// The header as JSON, refusing a name given twice (JSON parsers would keep the last).
json parseHeaderJson(std::string_view text, const fs::path& file) {
  if (!text.starts_with('{')) fail(file, "the header does not start with '{'");
  std::set<std::string> names;
  std::string repeated;
  const json::parser_callback_t noteKey = [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth == 1 && event == json::parse_event_t::key) {
      std::string key = parsed.get<std::string>();
      if (!names.insert(key).second && repeated.empty()) repeated = std::move(key);
    }
    return true;
  };
  json header;
  try {
    header = json::parse(text, noteKey);
  } catch (const json::parse_error& e) {
    // e.byte counts from 1, and is one past the end when the text ends too early.
    fail(file, "the header is not valid JSON (at byte " + std::to_string(e.byte - 1) + " of " +
                   std::to_string(text.size()) + ")");
  } catch (const json::out_of_range&) {
    fail(file, "the header holds a number too large for JSON's numbers");
  }
  if (!header.is_object()) fail(file, "the header is not a JSON object");
  if (!repeated.empty()) fail(file, "the header names " + repeated + " twice");
  return header;
}

// The entries sorted by offset must tile the data: each starts where the one before ends.
void checkTiling(std::vector<SafetensorsEntry>& entries, std::uint64_t dataBytes,
                 const fs::path& file) {
  std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  std::uint64_t expected = 0;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (entries[i].begin != expected) {
      fail(file, "tensor " + entries[i].name + " starts at byte " +
                     std::to_string(entries[i].begin) + " of the data, " +
                     (entries[i].begin < expected ? "overlapping " + entries[i - 1].name
                                                  : "leaving a gap") +
                     " (expected " + std::to_string(expected) + ")");
    }
    expected = entries[i].end;
  }
  if (expected != dataBytes) {
    fail(file, "the tensors cover " + std::to_string(expected) +
                   " bytes of data but the file has " + std::to_string(dataBytes));
  }
}

// The header's length, from the file's first bytes, checked against the readers' limit and the
// file's size (a header over the limit is refused as such, whether it fits in the file or not).
std::uint64_t checkedHeaderLength(std::span<const std::uint8_t> first, std::uint64_t fileBytes,
                                  const fs::path& file) {
  if (fileBytes < kLengthBytes) {
    fail(file, "only " + std::to_string(fileBytes) +
                   " bytes: too short for a safetensors file (8-byte header length)");
  }
  std::uint64_t headerBytes = 0;
  std::memcpy(&headerBytes, first.data(), kLengthBytes);
  if (headerBytes > kMaxHeaderBytes) {
    fail(file, "header length " + std::to_string(headerBytes) + " is over the " +
                   std::to_string(kMaxHeaderBytes) +
                   "-byte limit of safetensors readers (not safetensors, or damaged)");
  }
  if (headerBytes > fileBytes - kLengthBytes) {
    fail(file, "header length " + std::to_string(headerBytes) + " does not fit in the file's " +
                   std::to_string(fileBytes) + " bytes (not safetensors, or truncated)");
  }
  return headerBytes;
}

struct Layout {
  std::vector<SafetensorsEntry> entries;  // in data order
  std::map<std::string, std::string> metadata;
};

// The header's text, checked against the `dataBytes` that follow it.
Layout parseLayout(std::string_view text, std::uint64_t dataBytes, const fs::path& file) {
  const json header = parseHeaderJson(text, file);
  Layout layout;
  for (const auto& [key, value] : header.items()) {
    if (key == kMetadataKey) {
      layout.metadata = parseMetadata(value, file);
    } else {
      layout.entries.push_back(parseEntry(key, value, dataBytes, file));
    }
  }
  checkTiling(layout.entries, dataBytes, file);
  return layout;
}

// Weights must be numbers: a NaN or infinity would stop the training at its first step.
void checkFinite(const SafetensorsEntry& entry, std::span<const float> values,
                 const fs::path& file) {
  const auto bad =
      std::find_if(values.begin(), values.end(), [](float v) { return !std::isfinite(v); });
  if (bad == values.end()) return;
  fail(file, "tensor " + entry.name + " holds " + (std::isnan(*bad) ? "NaN" : "an infinite value") +
                 " at index " + std::to_string(bad - values.begin()) +
                 ": weights must be finite numbers");
}

// Reads `count` bytes at `offset` of the file, all of them.
void readAt(int fd, void* into, std::uint64_t count, std::uint64_t offset, const fs::path& file) {
  if (auto problem = base::readExactly(fd, into, count, offset)) fail(file, *problem);
}

}  // namespace

std::vector<std::uint8_t> encodeSafetensors(const SafetensorsContent& content) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!content.metadata.empty()) header[kMetadataKey] = content.metadata;
  std::uint64_t dataBytes = 0;
  for (const Tensor& t : content.tensors) {
    if (t.name.empty() || t.name == kMetadataKey || header.contains(t.name)) {
      throw std::invalid_argument("safetensors: bad or repeated tensor name '" + t.name + "'");
    }
    if (std::any_of(t.shape.begin(), t.shape.end(), [](std::int64_t d) { return d < 0; }) ||
        valueCount(t.shape) != t.values.size()) {
      throw std::invalid_argument("safetensors: tensor " + t.name +
                                  "'s shape does not match its values");
    }
    header[t.name] = tensorHeader(t, dataBytes);
    dataBytes += t.values.size() * sizeof(float);
  }
  std::string text = header.dump();
  text.append((kLengthBytes - text.size() % kLengthBytes) % kLengthBytes, ' ');
  std::vector<std::uint8_t> bytes(kLengthBytes + text.size() + dataBytes);
  const std::uint64_t length = text.size();
  std::memcpy(bytes.data(), &length, kLengthBytes);
  std::memcpy(bytes.data() + kLengthBytes, text.data(), text.size());
  std::uint8_t* data = bytes.data() + kLengthBytes + text.size();
  for (const Tensor& t : content.tensors) {
    std::memcpy(data, t.values.data(), t.values.size() * sizeof(float));
    data += t.values.size() * sizeof(float);
  }
  return bytes;
}

void writeSafetensors(const fs::path& path, const SafetensorsContent& content) {
  const std::vector<std::uint8_t> bytes = encodeSafetensors(content);
  const fs::path temporary = path.string() + ".tmp-" + std::to_string(::getpid());
  std::error_code ignored;
  fs::remove(temporary, ignored);  // left by a writer of this pid that crashed
  try {
    formats::writeNewFileDurably(temporary, bytes);
    formats::renameDurably(temporary, path);
  } catch (const std::exception& e) {
    fs::remove(temporary, ignored);
    // The message names the file asked for; the temporary, which the caller never named, only
    // in passing.
    std::string reason = e.what();
    const std::string prefix = temporary.string() + ": ";
    if (reason.starts_with(prefix)) reason.erase(0, prefix.size());
    fail(path, reason + " (writing it through " + temporary.filename().string() + ")");
  }
}

SafetensorsContent parseSafetensors(std::span<const std::uint8_t> bytes, const fs::path& name) {
  const std::uint64_t headerBytes =
      checkedHeaderLength(bytes.first(std::min(bytes.size(), kLengthBytes)), bytes.size(), name);
  const std::string_view text(reinterpret_cast<const char*>(bytes.data() + kLengthBytes),
                              headerBytes);
  const std::span<const std::uint8_t> data = bytes.subspan(kLengthBytes + headerBytes);
  Layout layout = parseLayout(text, data.size(), name);
  SafetensorsContent content;
  content.metadata = std::move(layout.metadata);
  for (SafetensorsEntry& entry : layout.entries) {
    Tensor& t = content.tensors.emplace_back();
    t.values.resize(entry.count());
    std::memcpy(t.values.data(), data.data() + entry.begin, entry.end - entry.begin);
    checkFinite(entry, t.values, name);
    t.name = std::move(entry.name);
    t.shape = std::move(entry.shape);
  }
  return content;
}

SafetensorsFile::SafetensorsFile(const fs::path& path) : path_(path) {
  if (auto problem = base::regularFileProblem(path)) fail(path, *problem);
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) fail(path, std::string("cannot open: ") + std::strerror(errno));
  try {
    struct stat info {};
    if (::fstat(fd_, &info) != 0) fail(path, std::string("cannot stat: ") + std::strerror(errno));
    const auto fileBytes = static_cast<std::uint64_t>(info.st_size);
    std::uint8_t length[kLengthBytes] = {};
    readAt(fd_, length, std::min<std::uint64_t>(fileBytes, kLengthBytes), 0, path);
    const std::uint64_t headerBytes = checkedHeaderLength(
        std::span<const std::uint8_t>(length, std::min<std::uint64_t>(fileBytes, kLengthBytes)),
        fileBytes, path);
    std::string text(headerBytes, '\0');
    readAt(fd_, text.data(), headerBytes, kLengthBytes, path);
    dataStart_ = kLengthBytes + headerBytes;
    Layout layout = parseLayout(text, fileBytes - dataStart_, path);
    entries_ = std::move(layout.entries);
    metadata_ = std::move(layout.metadata);
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

SafetensorsFile::~SafetensorsFile() {
  ::close(fd_);
}

void SafetensorsFile::read(const SafetensorsEntry& entry, std::span<float> out) const {
  if (out.size() != entry.count()) {
    throw std::invalid_argument("SafetensorsFile::read: room for " + std::to_string(out.size()) +
                                " values, tensor " + entry.name + " has " +
                                std::to_string(entry.count()));
  }
  readAt(fd_, out.data(), entry.end - entry.begin, dataStart_ + entry.begin, path_);
  checkFinite(entry, out, path_);
}

SafetensorsContent readSafetensors(const fs::path& path) {
  const SafetensorsFile file(path);
  SafetensorsContent content;
  content.metadata = file.metadata();
  for (const SafetensorsEntry& entry : file.tensors()) {
    Tensor& t = content.tensors.emplace_back();
    t.name = entry.name;
    t.shape = entry.shape;
    t.values.resize(entry.count());
    file.read(entry, t.values);
  }
  return content;
}

}  // namespace ringtrain::storage
