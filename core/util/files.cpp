#include "util/files.h"

#include "util/status.h"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace ctn {

const char *file_kind(unsigned mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "a special file";
}

int open_regular_file(const std::string &path, const std::string &what, uint64_t *size) {
  // Non-blocking first: a plain open of a FIFO waits for a writer.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) fail(CTN_ERR_IO, "%s %s: cannot open: %s", what.c_str(), path.c_str(), std::strerror(errno));
  struct stat st {};
  std::string why;
  if (::fstat(fd, &st) != 0) why = std::strerror(errno);
  else if (S_ISDIR(st.st_mode)) why = "is a directory";
  else if (!S_ISREG(st.st_mode)) why = std::string("is ") + file_kind(st.st_mode) + ", not a regular file";
  else if (::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0) why = std::strerror(errno);
  if (!why.empty()) {
    ::close(fd);
    fail(CTN_ERR_IO, "%s %s: %s", what.c_str(), path.c_str(), why.c_str());
  }
  if (size) *size = static_cast<uint64_t>(st.st_size);
  return fd;
}

std::string read_regular_file(const std::string &path, const std::string &what, int64_t offset, int64_t length) {
  uint64_t size = 0;
  const int fd = open_regular_file(path, what, &size);
  const auto total = static_cast<int64_t>(size);
  if (length < 0) length = offset <= total ? total - offset : 0;
  if (offset < 0 || offset > total || length > total - offset) {
    ::close(fd);
    fail(CTN_ERR_CORRUPT, "%s %s: the range [%lld, %lld) is beyond the end of the file (%lld bytes)", what.c_str(),
         path.c_str(), static_cast<long long>(offset), static_cast<long long>(offset + length),
         static_cast<long long>(total));
  }
  std::string buf(static_cast<size_t>(length), '\0');
  size_t got = 0;
  while (got < buf.size()) {
    const ssize_t r = ::pread(fd, buf.data() + got, buf.size() - got, static_cast<off_t>(offset + got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      const int e = r < 0 ? errno : 0;
      ::close(fd);
      fail(CTN_ERR_IO, "%s %s: cannot read: %s", what.c_str(), path.c_str(), e ? std::strerror(e) : "the file shrank");
    }
    got += static_cast<size_t>(r);
  }
  ::close(fd);
  return buf;
}

}  // namespace ctn
