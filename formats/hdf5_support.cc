#include "formats/hdf5_support.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "formats/format_error.h"

namespace ringtrain::formats::hdf5 {
namespace {

std::recursive_mutex& hdf5Mutex() {
  static std::recursive_mutex mutex;
  return mutex;
}

// One line: HDF5 messages are short, but a hostile file can put anything in a name it echoes.
std::string oneLine(const char* text) {
  std::string line = text ? text : "";
  for (char& c : line) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  return line;
}

struct StackEntry {
  std::string function;
  std::string description;
};

herr_t collectEntry(unsigned, const H5E_error2_t* error, void* data) {
  static_cast<std::vector<StackEntry>*>(data)->push_back(
      {oneLine(error->func_name), oneLine(error->desc)});
  return 0;
}

Handle checked(hid_t id, Handle::Closer closer, const std::filesystem::path& file,
               const std::string& context) {
  check(id, file, context);
  return Handle(id, closer);
}

}  // namespace

Hdf5Scope::Hdf5Scope() : lock_(hdf5Mutex()) {
  // Both calls act on this thread's default error stack; they fail only for a bad stack id.
  H5Eget_auto2(H5E_DEFAULT, &savedFunction_, &savedData_);
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}

Hdf5Scope::~Hdf5Scope() {
  H5Eset_auto2(H5E_DEFAULT, savedFunction_, savedData_);
}

std::string lastErrorText() {
  std::vector<StackEntry> entries;
  // Upward: the innermost function, where the problem was found, comes first; the API function
  // the caller called comes last.
  if (H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, collectEntry, &entries) < 0 || entries.empty()) {
    return "";
  }
  const StackEntry& inner = entries.front();
  const StackEntry& api = entries.back();
  std::string text = api.function + ": " + api.description;
  if (entries.size() > 1 && inner.description != api.description) text += ": " + inner.description;
  return text;
}

void fail(const std::filesystem::path& file, const std::string& context) {
  const std::string library = lastErrorText();
  H5Eclear2(H5E_DEFAULT);
  throw FormatError(file.string() + ": " + context +
                    (library.empty() ? "" : " (HDF5: " + library + ")"));
}

Handle& Handle::operator=(Handle&& other) noexcept {
  if (this != &other) {
    reset();
    id_ = std::exchange(other.id_, -1);
    closer_ = other.closer_;
  }
  return *this;
}

void Handle::reset() {
  if (id_ >= 0 && closer_) closer_(id_);
  id_ = -1;
}

void Handle::close(const std::filesystem::path& file, const std::string& context) {
  const hid_t id = std::exchange(id_, -1);
  if (id >= 0 && closer_) check(closer_(id), file, context);
}

Handle checkedFile(hid_t id, const std::filesystem::path& file, const std::string& context) {
  return checked(id, H5Fclose, file, context);
}
Handle checkedDataset(hid_t id, const std::filesystem::path& file, const std::string& context) {
  return checked(id, H5Dclose, file, context);
}
Handle checkedSpace(hid_t id, const std::filesystem::path& file, const std::string& context) {
  return checked(id, H5Sclose, file, context);
}
Handle checkedType(hid_t id, const std::filesystem::path& file, const std::string& context) {
  return checked(id, H5Tclose, file, context);
}
Handle checkedAttribute(hid_t id, const std::filesystem::path& file, const std::string& context) {
  return checked(id, H5Aclose, file, context);
}
Handle checkedGroup(hid_t id, const std::filesystem::path& file, const std::string& context) {
  return checked(id, H5Gclose, file, context);
}
Handle checkedProperties(hid_t id, const std::filesystem::path& file, const std::string& context) {
  return checked(id, H5Pclose, file, context);
}

std::string describeType(hid_t type) {
  const std::size_t bytes = H5Tget_size(type);
  const std::string bits = std::to_string(8 * bytes);
  switch (H5Tget_class(type)) {
    case H5T_INTEGER:
      return (H5Tget_sign(type) == H5T_SGN_NONE ? "uint" : "int") + bits;
    case H5T_FLOAT:
      return "float" + bits;
    case H5T_STRING:
      return H5Tis_variable_str(type) > 0 ? "variable-length string"
                                          : "string of " + std::to_string(bytes) + " bytes";
    case H5T_COMPOUND:
      return "compound";
    case H5T_ENUM:
      return "enum";
    case H5T_ARRAY:
      return "array";
    case H5T_VLEN:
      return "variable-length sequence";
    case H5T_OPAQUE:
      return "opaque";
    case H5T_REFERENCE:
      return "reference";
    case H5T_BITFIELD:
      return "bitfield";
    case H5T_TIME:
      return "time";
    default:
      return "unknown type";
  }
}

namespace {

[[noreturn]] void failPlain(const std::filesystem::path& file, const std::string& what) {
  throw FormatError(file.string() + ": " + what);
}

void writeScalarAttribute(hid_t object, const char* name, hid_t fileType, hid_t memoryType,
                          const void* value, const std::filesystem::path& file) {
  const std::string what = std::string("writing attribute ") + name;
  Handle space = checkedSpace(H5Screate(H5S_SCALAR), file, what);
  Handle attribute = checkedAttribute(
      H5Acreate2(object, name, fileType, space.get(), H5P_DEFAULT, H5P_DEFAULT), file, what);
  check(H5Awrite(attribute.get(), memoryType, value), file, what);
  attribute.close(file, what);
}

// An attribute or a dataset: the two have the same questions but separate API calls.
struct ValueSource {
  hid_t id;
  bool attribute;
  std::string what;  // "attribute num_classes", "dataset /config"

  hid_t type() const { return attribute ? H5Aget_type(id) : H5Dget_type(id); }
  hid_t space() const { return attribute ? H5Aget_space(id) : H5Dget_space(id); }
  herr_t read(hid_t memoryType, void* buffer) const {
    return attribute ? H5Aread(id, memoryType, buffer)
                     : H5Dread(id, memoryType, H5S_ALL, H5S_ALL, H5P_DEFAULT, buffer);
  }
};

// The one value's type, after checking there is exactly one value.
Handle singleValueType(const ValueSource& source, const std::filesystem::path& file) {
  Handle space = checkedSpace(source.space(), file, "reading " + source.what);
  const hssize_t points = H5Sget_simple_extent_npoints(space.get());
  if (points != 1) {
    failPlain(file, source.what + " holds " + std::to_string(points) + " values; expected one");
  }
  return checkedType(source.type(), file, "reading " + source.what);
}

template <class Value>
Value readInteger(const ValueSource& source, hid_t memoryType, const std::filesystem::path& file) {
  Handle type = singleValueType(source, file);
  if (H5Tget_class(type.get()) != H5T_INTEGER) {
    failPlain(file, source.what + " is a " + describeType(type.get()) + "; expected an integer");
  }
  Value value{};
  check(source.read(memoryType, &value), file, "reading " + source.what);
  return value;
}

std::string readString(const ValueSource& source, const std::filesystem::path& file,
                       std::size_t maxBytes) {
  const std::string what = "reading " + source.what;
  Handle type = singleValueType(source, file);
  if (H5Tget_class(type.get()) != H5T_STRING) {
    failPlain(file, source.what + " is a " + describeType(type.get()) + "; expected a string");
  }
  const htri_t variable = check(H5Tis_variable_str(type.get()), file, what);
  if (variable > 0) {
    // The file's own type is a valid memory type for strings (they have no byte order).
    char* text = nullptr;
    check(source.read(type.get(), &text), file, what);
    std::string result = text ? text : "";
    H5free_memory(text);
    if (result.size() > maxBytes) {
      failPlain(file, source.what + " has " + std::to_string(result.size()) + " bytes; at most " +
                          std::to_string(maxBytes) + " are expected");
    }
    return result;
  }
  const std::size_t size = H5Tget_size(type.get());
  if (size == 0 || size > maxBytes) {
    failPlain(file, source.what + " is a string of " + std::to_string(size) + " bytes; at most " +
                        std::to_string(maxBytes) + " are expected");
  }
  std::string result(size, '\0');
  check(source.read(type.get(), result.data()), file, what);
  // Fixed-length strings are padded with NULs (or spaces, by other writers' choice).
  const std::size_t end = result.find_last_not_of(std::string_view("\0 ", 2));
  result.resize(end == std::string::npos ? 0 : end + 1);
  return result;
}

Handle fixedStringType(std::string_view text, const std::filesystem::path& file,
                       const std::string& what) {
  Handle type = checkedType(H5Tcopy(H5T_C_S1), file, what);
  check(H5Tset_size(type.get(), std::max<std::size_t>(text.size(), 1)), file, what);
  check(H5Tset_strpad(type.get(), H5T_STR_NULLPAD), file, what);
  return type;
}

// An empty string still takes one byte: HDF5 has no zero-length fixed strings.
std::string paddedText(std::string_view text) {
  return text.empty() ? std::string(1, '\0') : std::string(text);
}

std::optional<Handle> openAttribute(hid_t object, const char* name,
                                    const std::filesystem::path& file) {
  const std::string what = std::string("looking for attribute ") + name;
  if (check(H5Aexists(object, name), file, what) == 0) return std::nullopt;
  return checkedAttribute(H5Aopen(object, name, H5P_DEFAULT), file, what);
}

}  // namespace

void writeIntegerAttribute(hid_t object, const char* name, std::int64_t value,
                           const std::filesystem::path& file) {
  writeScalarAttribute(object, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &value, file);
}

void writeUnsignedAttribute(hid_t object, const char* name, std::uint64_t value,
                            const std::filesystem::path& file) {
  writeScalarAttribute(object, name, H5T_STD_U64LE, H5T_NATIVE_UINT64, &value, file);
}

void writeStringAttribute(hid_t object, const char* name, std::string_view text,
                          const std::filesystem::path& file) {
  const std::string what = std::string("writing attribute ") + name;
  Handle type = fixedStringType(text, file, what);
  const std::string padded = paddedText(text);
  writeScalarAttribute(object, name, type.get(), type.get(), padded.data(), file);
}

std::optional<std::int64_t> readIntegerAttribute(hid_t object, const char* name,
                                                 const std::filesystem::path& file) {
  std::optional<Handle> attribute = openAttribute(object, name, file);
  if (!attribute) return std::nullopt;
  return readInteger<std::int64_t>({attribute->get(), true, std::string("attribute ") + name},
                                   H5T_NATIVE_INT64, file);
}

std::optional<std::uint64_t> readUnsignedAttribute(hid_t object, const char* name,
                                                   const std::filesystem::path& file) {
  std::optional<Handle> attribute = openAttribute(object, name, file);
  if (!attribute) return std::nullopt;
  return readInteger<std::uint64_t>({attribute->get(), true, std::string("attribute ") + name},
                                    H5T_NATIVE_UINT64, file);
}

std::optional<std::string> readStringAttribute(hid_t object, const char* name,
                                               const std::filesystem::path& file,
                                               std::size_t maxBytes) {
  std::optional<Handle> attribute = openAttribute(object, name, file);
  if (!attribute) return std::nullopt;
  return readString({attribute->get(), true, std::string("attribute ") + name}, file, maxBytes);
}

void writeStringDataset(hid_t location, const char* name, std::string_view text,
                        const std::filesystem::path& file) {
  const std::string what = std::string("writing dataset ") + name;
  Handle type = fixedStringType(text, file, what);
  Handle space = checkedSpace(H5Screate(H5S_SCALAR), file, what);
  Handle dataset = checkedDataset(
      H5Dcreate2(location, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
      file, what);
  const std::string padded = paddedText(text);
  check(H5Dwrite(dataset.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, padded.data()), file,
        what);
  dataset.close(file, what);
}

std::string readStringDataset(hid_t location, const char* name, const std::filesystem::path& file,
                              std::size_t maxBytes) {
  const std::string what = std::string("dataset ") + name;
  if (check(H5Lexists(location, name, H5P_DEFAULT), file, "looking for " + what) == 0) {
    failPlain(file, "no " + what);
  }
  Handle dataset = checkedDataset(H5Dopen2(location, name, H5P_DEFAULT), file, "opening " + what);
  return readString({dataset.get(), false, what}, file, maxBytes);
}

}  // namespace ringtrain::formats::hdf5
