#include "src/storage/safetensors.h"

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

#include "base/file_checks.h"
#include "data/durable_io.h"

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

// Where one tensor's values lie in the data, as the header says.
struct Entry {
  std::string name;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
};

std::uint64_t offsetAt(const json& offsets, std::size_t i) {
  return offsets.at(i).get<std::uint64_t>();
}

Entry parseEntry(const std::string& name, const json& info, std::uint64_t dataBytes,
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
  Entry entry{name, {}, offsetAt(*offsets, 0), offsetAt(*offsets, 1)};
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
void checkTiling(std::vector<Entry>& entries, std::uint64_t dataBytes, const fs::path& file) {
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
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
    data::writeNewFileDurably(temporary, bytes);
    data::renameDurably(temporary, path);
  } catch (const std::exception& e) {
    fs::remove(temporary, ignored);
    throw CheckpointError(e.what());
  }
}

SafetensorsContent parseSafetensors(std::span<const std::uint8_t> bytes, const fs::path& name) {
  if (bytes.size() < kLengthBytes) {
    fail(name, "only " + std::to_string(bytes.size()) +
                   " bytes: too short for a safetensors file (8-byte header length)");
  }
  std::uint64_t headerBytes = 0;
  std::memcpy(&headerBytes, bytes.data(), kLengthBytes);
  if (headerBytes > kMaxHeaderBytes || headerBytes > bytes.size() - kLengthBytes) {
    fail(name, "header length " + std::to_string(headerBytes) + " does not fit in the file's " +
                   std::to_string(bytes.size()) + " bytes (not safetensors, or truncated)");
  }
  const std::string_view text(reinterpret_cast<const char*>(bytes.data() + kLengthBytes),
                              headerBytes);
  const json header = parseHeaderJson(text, name);
  const std::span<const std::uint8_t> data = bytes.subspan(kLengthBytes + headerBytes);
  SafetensorsContent content;
  std::vector<Entry> entries;
  for (const auto& [key, value] : header.items()) {
    if (key == kMetadataKey) {
      content.metadata = parseMetadata(value, name);
    } else {
      entries.push_back(parseEntry(key, value, data.size(), name));
    }
  }
  checkTiling(entries, data.size(), name);
  for (Entry& entry : entries) {
    Tensor& t = content.tensors.emplace_back();
    t.name = std::move(entry.name);
    t.shape = std::move(entry.shape);
    t.values.resize((entry.end - entry.begin) / sizeof(float));
    std::memcpy(t.values.data(), data.data() + entry.begin, entry.end - entry.begin);
  }
  return content;
}

SafetensorsContent readSafetensors(const fs::path& path) {
  if (auto problem = base::regularFileProblem(path)) fail(path, *problem);
  std::error_code ec;
  std::ifstream in(path, std::ios::binary);
  const std::uintmax_t size = fs::file_size(path, ec);
  if (!in || ec) fail(path, "cannot open: " + std::string(std::strerror(errno)));
  std::vector<std::uint8_t> bytes(size);
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(size));
  if (in.gcount() != static_cast<std::streamsize>(size)) fail(path, "read error");
  return parseSafetensors(bytes, path);
}

}  // namespace ringtrain::storage
