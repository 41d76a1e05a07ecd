#include "base/read_exactly.h"

#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace ringtrain::base {

std::optional<std::string> readExactly(int fd, void* into, std::size_t count,
                                       std::uint64_t offset) {
  auto* bytes = static_cast<unsigned char*>(into);
  std::size_t done = 0;
  while (done < count) {
    const ssize_t n = ::pread(fd, bytes + done, count - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::string("read error: ") + std::strerror(errno);
    if (n == 0) return std::string("truncated while being read (the file shrank)");
    done += static_cast<std::size_t>(n);
  }
  return std::nullopt;
}

}  // namespace ringtrain::base
