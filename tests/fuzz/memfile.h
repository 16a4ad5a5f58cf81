// The fuzz targets of file loaders hand the input to the public API as a path without touching the
// disk: an anonymous memory file (memfd_create), named /proc/self/fd/N. It is a regular file, so
// the loaders read it as they read a checkpoint or dataset on disk.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

class MemFile {
 public:
  MemFile(const uint8_t *data, size_t size) {
    fd_ = memfd_create("chutney-fuzz", MFD_CLOEXEC);
    if (fd_ < 0) return;
    size_t off = 0;
    while (off < size) {
      ssize_t w = ::write(fd_, data + off, size - off);
      if (w <= 0) break;
      off += static_cast<size_t>(w);
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~MemFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  MemFile(const MemFile &) = delete;
  MemFile &operator=(const MemFile &) = delete;
  bool ok() const { return fd_ >= 0; }
  const char *path() const { return path_.c_str(); }

 private:
  int fd_ = -1;
  std::string path_;
};
