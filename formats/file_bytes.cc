#include "formats/file_bytes.h"

#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <system_error>

#include "base/file_checks.h"
#include "formats/format_error.h"

namespace ringtrain::formats {
namespace {

[[noreturn]] void fail(const std::filesystem::path& path, const std::string& what) {
  throw FormatError(path.string() + ": " + what);
}

struct FileCloser {
  void operator()(std::FILE* file) const { std::fclose(file); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

std::vector<std::uint8_t> readRaw(const std::filesystem::path& path) {
  if (auto problem = base::regularFileProblem(path)) fail(path, *problem);
  File file(std::fopen(path.c_str(), "rb"));
  if (!file) fail(path, std::string("cannot open: ") + std::strerror(errno));
  // Start from the size the file system reports -- one byte more, so that the end of an
  // unchanged file is seen without growing -- and grow in chunks past it: the file may change
  // under us, and a pipe or /proc file has no size at all. (Starting from a fixed 1 MiB chunk
  // made every small file cost a megabyte of zeroed memory.)
  struct stat info {};
  std::size_t expected = 0;
  if (::fstat(fileno(file.get()), &info) == 0 && S_ISREG(info.st_mode) && info.st_size > 0) {
    expected = static_cast<std::size_t>(info.st_size);
  }
  std::vector<std::uint8_t> bytes(expected + 1);
  std::size_t used = 0;
  constexpr std::size_t kChunk = std::size_t{1} << 20;
  for (;;) {
    if (used == bytes.size()) bytes.resize(std::max(2 * bytes.size(), used + kChunk));
    const std::size_t got = std::fread(bytes.data() + used, 1, bytes.size() - used, file.get());
    used += got;
    if (got == 0) break;
  }
  if (std::ferror(file.get())) fail(path, std::string("read error: ") + std::strerror(errno));
  bytes.resize(used);
  // Copying a large file to give back one byte is not worth it; a buffer grown for a pipe is.
  if (bytes.capacity() - used > used / 8) bytes.shrink_to_fit();
  return bytes;
}

bool startsWithGzipMagic(std::span<const std::uint8_t> bytes) {
  return bytes.size() >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b;
}

// The buffers on both sides of a zlib stream: the whole input, fed in slices, and an output that
// doubles whenever zlib has filled it, up to a limit the caller sets. zlib counts in uInt (32
// bits), hence slices below 4 GiB.
class ZlibBuffers {
 public:
  ZlibBuffers(std::span<const std::uint8_t> in, std::size_t initialOut)
      : in_(in), initialOut_(std::max<std::size_t>(initialOut, 1 << 16)) {}

  // Points the stream at the next input slice (once the last is used up) and at free output
  // room -- none past `outLimit` bytes in all, which must be above produced().size() -- runs
  // `call(zs, lastSlice)` (inflate or deflate), and counts what it took and gave.
  template <class Call>
  int step(z_stream& zs, Call call, std::size_t outLimit = SIZE_MAX) {
    if (zs.avail_in == 0 && consumed_ < in_.size()) {
      zs.next_in = const_cast<Bytef*>(in_.data() + consumed_);  // zlib's API is not const
      zs.avail_in = static_cast<uInt>(std::min(kSlice, in_.size() - consumed_));
    }
    if (out_.size() == produced_) {
      out_.resize(std::min(std::max(2 * out_.size(), initialOut_), outLimit));
    }
    zs.next_out = out_.data() + produced_;
    zs.avail_out = static_cast<uInt>(std::min(kSlice, std::min(out_.size(), outLimit) - produced_));
    const uInt inBefore = zs.avail_in;
    const uInt outBefore = zs.avail_out;
    const int rc = call(zs, consumed_ + zs.avail_in == in_.size());
    consumed_ += inBefore - zs.avail_in;
    produced_ += outBefore - zs.avail_out;
    return rc;
  }

  std::size_t inputBytes() const { return in_.size(); }
  std::span<const std::uint8_t> unconsumed() const { return in_.subspan(consumed_); }
  std::span<const std::uint8_t> produced() const { return {out_.data(), produced_}; }
  std::vector<std::uint8_t> take() {
    out_.resize(produced_);
    out_.shrink_to_fit();
    return std::move(out_);
  }

 private:
  static constexpr std::size_t kSlice = std::size_t{1} << 30;
  std::span<const std::uint8_t> in_;
  std::size_t initialOut_;
  std::vector<std::uint8_t> out_;
  std::size_t consumed_ = 0;
  std::size_t produced_ = 0;
};

std::vector<std::uint8_t> deflateGzip(std::span<const std::uint8_t> in) {
  z_stream zs{};
  // Level 6 is gzip's default: the files are written once and read many times, so compression
  // speed hardly matters, but level 9 buys almost nothing on image data.
  if (deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    throw FormatError("zlib deflateInit2 failed");
  }
  std::unique_ptr<z_stream, int (*)(z_stream*)> guard(&zs, deflateEnd);
  ZlibBuffers buffers(in, in.size() / 2);
  for (;;) {
    const int rc = buffers.step(zs, [](z_stream& s, bool lastSlice) {
      return deflate(&s, lastSlice ? Z_FINISH : Z_NO_FLUSH);
    });
    if (rc == Z_STREAM_END) break;
    if (rc != Z_OK && rc != Z_BUF_ERROR) throw FormatError("zlib deflate failed");
  }
  return buffers.take();
}

void writeAll(const std::filesystem::path& path, std::span<const std::uint8_t> bytes) {
  File file(std::fopen(path.c_str(), "wb"));
  if (!file) fail(path, std::string("cannot create: ") + std::strerror(errno));
  if (std::fwrite(bytes.data(), 1, bytes.size(), file.get()) != bytes.size() ||
      std::fflush(file.get()) != 0 || fsync(fileno(file.get())) != 0) {
    fail(path, std::string("write error: ") + std::strerror(errno));
  }
  if (std::fclose(file.release()) != 0) {
    fail(path, std::string("write error: ") + std::strerror(errno));
  }
}

}  // namespace

bool isGzipPath(const std::filesystem::path& path) {
  return path.extension() == ".gz";
}

// Inflates a gzip file's bytes as far as asked. The stream is checked as far as it is inflated;
// once its end is reached, only further gzip members may follow it.
class FileContent::Inflater {
 public:
  Inflater(const std::filesystem::path& path, std::span<const std::uint8_t> in)
      : path_(path), buffers_(in, in.size() * 4) {
    // 15 + 16: the largest window, gzip wrapper only (a zlib or raw stream is an error).
    if (inflateInit2(&zs_, 15 + 16) != Z_OK) fail(path_, "zlib inflateInit2 failed");
  }
  ~Inflater() { inflateEnd(&zs_); }
  Inflater(const Inflater&) = delete;
  Inflater& operator=(const Inflater&) = delete;

  // Inflates until `count` bytes are out or the stream has ended; returns all that is out.
  std::span<const std::uint8_t> inflateUpTo(std::size_t count) {
    while (!ended_ && buffers_.produced().size() < count) {
      const int rc = buffers_.step(
          zs_, [](z_stream& s, bool) { return inflate(&s, Z_NO_FLUSH); }, count);
      check(rc);
    }
    return buffers_.produced();
  }

  std::vector<std::uint8_t> take() { return buffers_.take(); }

 private:
  void check(int rc) {
    if (rc == Z_STREAM_END) {
      const auto rest = buffers_.unconsumed();
      if (rest.empty()) {
        ended_ = true;
        return;
      }
      // gzip -d accepts concatenated members; anything else after the data is damage.
      if (!startsWithGzipMagic(rest)) {
        fail(path_, std::to_string(rest.size()) + " trailing bytes after the gzip data");
      }
      inflateReset(&zs_);
      return;
    }
    if (rc == Z_DATA_ERROR) {
      fail(path_,
           std::string("corrupt gzip data (") + (zs_.msg ? zs_.msg : "zlib data error") + ")");
    }
    if (rc == Z_MEM_ERROR) fail(path_, "out of memory while inflating the gzip data");
    // No progress with every input byte given: the stream stops before its end.
    if (rc == Z_BUF_ERROR && zs_.avail_in == 0 && buffers_.unconsumed().empty()) {
      fail(path_, "truncated gzip data: the compressed stream ends early (" +
                      std::to_string(buffers_.inputBytes()) + " bytes)");
    }
    if (rc != Z_OK && rc != Z_BUF_ERROR) {
      fail(path_, "zlib inflate failed (" + std::to_string(rc) + ")");
    }
  }

  std::filesystem::path path_;
  z_stream zs_{};
  ZlibBuffers buffers_;
  bool ended_ = false;
};

FileContent::FileContent(const std::filesystem::path& path) : path_(path), raw_(readRaw(path)) {
  // A .gz file of 0 bytes is simply empty, not gzip data that inflates to nothing.
  if (isGzipPath(path_) && !raw_.empty()) {
    if (!startsWithGzipMagic(raw_)) fail(path_, "not gzip data, although the name ends in .gz");
    inflater_ = std::make_unique<Inflater>(path_, raw_);
  }
}

FileContent::~FileContent() = default;

std::uint64_t FileContent::maxContentBytes() const {
  return gzipped() ? kMaxDeflateExpansion * raw_.size() : raw_.size();
}

std::span<const std::uint8_t> FileContent::readUpTo(std::uint64_t count) {
  // No content lies past maxContentBytes(), so from here on the count fits in memory.
  const auto bounded = static_cast<std::size_t>(std::min(count, maxContentBytes() + 1));
  if (inflater_) return inflater_->inflateUpTo(bounded);
  asked_ = std::min(bounded, raw_.size());
  return std::span<const std::uint8_t>(raw_).first(asked_);
}

std::vector<std::uint8_t> FileContent::take() {
  if (inflater_) return inflater_->take();
  raw_.resize(asked_);
  return std::move(raw_);
}

void writeFileAtomically(const std::filesystem::path& path, std::span<const std::uint8_t> bytes) {
  // The process id keeps two writers of the same file from sharing a temporary name.
  const std::filesystem::path temporary =
      path.string() + ".partial-" + std::to_string(static_cast<long>(getpid()));
  try {
    if (isGzipPath(path)) {
      writeAll(temporary, deflateGzip(bytes));
    } else {
      writeAll(temporary, bytes);
    }
    std::error_code ec;
    std::filesystem::rename(temporary, path, ec);
    if (ec)
      fail(path, "cannot rename " + temporary.filename().string() + " to it: " + ec.message());
  } catch (...) {
    std::error_code ignored;
    std::filesystem::remove(temporary, ignored);
    throw;
  }
}

}  // namespace ringtrain::formats
