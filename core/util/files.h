// Reading files a user names without ever blocking or misreading: a FIFO, a directory or a device
// is refused with CTN_ERR_IO naming the path and what it is, instead of an open() that waits for
// a writer forever (a FIFO) or a read that fails obscurely (a directory).
#pragma once

#include <cstdint>
#include <string>

namespace ctn {

// "a FIFO", "a directory", "a character device", "a block device", "a socket" or "a special
// file", for a stat st_mode that is not a regular file's.
const char *file_kind(unsigned mode);

// Opens `path` read-only (close-on-exec) if it is a regular file, else throws CTN_ERR_IO
// "<what> <path>: <reason>" (no such file, is a FIFO / a directory / a device...). The returned
// descriptor blocks as usual; *size (may be NULL) is the file's size. The caller closes it.
int open_regular_file(const std::string &path, const std::string &what, uint64_t *size);

// The bytes [offset, offset + length) of the regular file `path` (length < 0: to the end);
// CTN_ERR_IO as open_regular_file, and for a short read; a range beyond the end is CTN_ERR_CORRUPT.
std::string read_regular_file(const std::string &path, const std::string &what, int64_t offset = 0,
                              int64_t length = -1);

}  // namespace ctn
