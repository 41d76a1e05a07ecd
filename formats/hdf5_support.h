// The HDF5 C library the way ringtrain calls it: one lock, no diagnostics on stderr, every call
// checked, every identifier closed.
//
// Thread safety. Debian 12's libhdf5 1.10.8 (the serial build) happens to be compiled with
// --enable-threadsafe (H5is_library_threadsafe says 1), but many HDF5 builds on clusters are not,
// and even a thread-safe build only serialises every call behind one global lock. So ringtrain
// never calls HDF5 from two threads at once: every use holds Hdf5Scope, which takes one
// process-wide mutex. A reader gains nothing from several threads anyway; the single HDF5 lock
// would serialise them.
//
// Errors. HDF5 prints a many-line error stack to stderr by default; Hdf5Scope turns that off for
// its duration (and restores what was set before), and check() turns a failed call into one
// FormatError line: "<file>: <what we were doing> (HDF5: <the library's innermost message>)".
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace ringtrain::formats::hdf5 {

// Holds the process-wide HDF5 mutex and silences HDF5's automatic error printing on this thread
// while it lives. Recursive: a function holding it may call another that takes it again.
class Hdf5Scope {
 public:
  Hdf5Scope();
  ~Hdf5Scope();
  Hdf5Scope(const Hdf5Scope&) = delete;
  Hdf5Scope& operator=(const Hdf5Scope&) = delete;

 private:
  std::unique_lock<std::recursive_mutex> lock_;
  H5E_auto2_t savedFunction_ = nullptr;
  void* savedData_ = nullptr;
};

// The library's own account of the last failure on this thread, one line: the API function and
// the innermost (most specific) message, e.g. "H5Fopen: truncated file: eof = 96, ...". Empty
// when the error stack is empty.
std::string lastErrorText();

// Throws FormatError "<file>: <context> (HDF5: <lastErrorText()>)".
[[noreturn]] void fail(const std::filesystem::path& file, const std::string& context);

// Throws as fail() when `result` is negative (HDF5's failure value for hid_t, herr_t and htri_t);
// otherwise returns it.
template <class Result>
Result check(Result result, const std::filesystem::path& file, const std::string& context) {
  if (result < 0) fail(file, context);
  return result;
}

// Owns one HDF5 identifier and closes it with the matching H5?close. Closing errors are
// ignored: a close in a destructor may run while an exception is on its way out.
class Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  Handle() = default;
  Handle(hid_t id, Closer closer) : id_(id), closer_(closer) {}
  ~Handle() { reset(); }
  Handle(Handle&& other) noexcept : id_(other.id_), closer_(other.closer_) { other.id_ = -1; }
  Handle& operator=(Handle&& other) noexcept;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;

  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  void reset();
  // Closes now and reports a failure (a file close flushes, and can fail).
  void close(const std::filesystem::path& file, const std::string& context);

 private:
  hid_t id_ = -1;
  Closer closer_ = nullptr;
};

// Checked creation of handles of each kind: the id is checked, then owned.
Handle checkedFile(hid_t id, const std::filesystem::path& file, const std::string& context);
Handle checkedDataset(hid_t id, const std::filesystem::path& file, const std::string& context);
Handle checkedSpace(hid_t id, const std::filesystem::path& file, const std::string& context);
Handle checkedType(hid_t id, const std::filesystem::path& file, const std::string& context);
Handle checkedAttribute(hid_t id, const std::filesystem::path& file, const std::string& context);
Handle checkedGroup(hid_t id, const std::filesystem::path& file, const std::string& context);
Handle checkedProperties(hid_t id, const std::filesystem::path& file, const std::string& context);

// "uint8", "int64", "float32", "string of 12 bytes", "compound" ...: a type in words, for messages.
std::string describeType(hid_t type);

// Attributes of an object (a file, a group, a dataset), one value each: integers as 64-bit
// little-endian, strings as fixed-length strings (variable-length ones, which h5py writes, are
// read too).
void writeIntegerAttribute(hid_t object, const char* name, std::int64_t value,
                           const std::filesystem::path& file);
void writeUnsignedAttribute(hid_t object, const char* name, std::uint64_t value,
                            const std::filesystem::path& file);
void writeStringAttribute(hid_t object, const char* name, std::string_view text,
                          const std::filesystem::path& file);
// nullopt when there is no such attribute; FormatError naming the file and attribute when there is
// one of another kind (not an integer, not exactly one value, a string above maxBytes).
std::optional<std::int64_t> readIntegerAttribute(hid_t object, const char* name,
                                                 const std::filesystem::path& file);
std::optional<std::uint64_t> readUnsignedAttribute(hid_t object, const char* name,
                                                   const std::filesystem::path& file);
std::optional<std::string> readStringAttribute(hid_t object, const char* name,
                                               const std::filesystem::path& file,
                                               std::size_t maxBytes);

// A dataset holding one string, for text too long for an attribute (attributes live in the
// object header, 64 KiB at most).
void writeStringDataset(hid_t location, const char* name, std::string_view text,
                        const std::filesystem::path& file);
// FormatError when the dataset is missing, not one string, or longer than maxBytes.
std::string readStringDataset(hid_t location, const char* name, const std::filesystem::path& file,
                              std::size_t maxBytes);

}  // namespace ringtrain::formats::hdf5
