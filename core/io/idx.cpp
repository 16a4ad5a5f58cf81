// IDX reader (the MNIST family's format): a big-endian magic 0x0000TTRR (TT element type, 0x08 =
// u8; RR rank), RR big-endian u32 dims, then the elements. Files may be gzip-compressed; zlib's
// gzread passes plain files through unchanged, so one path reads both.
//
// Hostile files: dimensions are checked against fixed bounds before anything is sized from them,
// and the body is read in chunks into a growing buffer, so a header that promises gigabytes on a
// file holding kilobytes fails as "truncated" after allocating about what the file holds.
#include <chutney/data.h>

#include "io/dataset.h"
#include "io/io_common.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace ctn;
using namespace ctn::io;

namespace {

constexpr uint32_t kMagicLabels = 0x00000801;  // u8, rank 1
constexpr uint32_t kMagicImages = 0x00000803;  // u8, rank 3
constexpr int64_t kMaxCount = 100'000'000;
constexpr int64_t kMaxSide = 65536;
constexpr int64_t kMaxBytes = int64_t{4} << 30;  // no IDX we accept holds more than 4 GiB
constexpr size_t kChunk = size_t{1} << 20;

constexpr const char *kPackageHint =
    "Fashion-MNIST comes with the Debian package dataset-fashion-mnist "
    "(apt-get install dataset-fashion-mnist), or pass the directory holding the files";

struct Gz {
  gzFile f = nullptr;
  std::string path;
  ~Gz() {
    if (f != nullptr) gzclose(f);
  }
};

void open_gz(Gz &g, const std::string &path) {
  g.path = path;
  // gzopen on a directory succeeds and fails later with an obscure message, and a plain open of
  // a FIFO blocks until a writer comes (forever): open without blocking, check what the
  // descriptor is, and only a regular file is read.
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) fail(CTN_ERR_IO, "cannot open %s: %s", path.c_str(), std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
      ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0) {
    const bool dir = S_ISDIR(st.st_mode);
    ::close(fd);
    fail(CTN_ERR_IO, "cannot open %s: %s", path.c_str(), dir ? "is a directory" : "not a regular file");
  }
  errno = 0;
  g.f = gzdopen(fd, "rb");
  if (g.f == nullptr) {
    ::close(fd);
    fail(CTN_ERR_IO, "cannot open %s: %s", path.c_str(), errno ? std::strerror(errno) : "gzdopen failed");
  }
  gzbuffer(g.f, 1u << 17);
}

// Reads up to n bytes; returns how many arrived (short only at the end of the data). A gzip
// format error is corruption; a system error is I/O.
size_t read_some(Gz &g, void *dst, size_t n, const char *what) {
  auto *p = static_cast<unsigned char *>(dst);
  size_t done = 0;
  while (done < n) {
    unsigned chunk = static_cast<unsigned>(std::min<size_t>(n - done, kChunk));
    int got = gzread(g.f, p + done, chunk);
    if (got < 0) {
      int errnum = 0;
      const char *msg = gzerror(g.f, &errnum);
      if (errnum == Z_ERRNO)
        fail(CTN_ERR_IO, "%s: read error in %s: %s", g.path.c_str(), what, std::strerror(errno));
      fail(CTN_ERR_CORRUPT, "%s: gzip error in %s: %s", g.path.c_str(), what, msg ? msg : "?");
    }
    if (got == 0) break;
    done += static_cast<size_t>(got);
  }
  return done;
}

uint32_t be32(const unsigned char *b) {
  return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | uint32_t{b[3]};
}

// Reads one IDX file of the expected magic; dims receives rank values.
std::vector<uint8_t> read_idx(const std::string &path, uint32_t magic, int64_t *dims) {
  Gz g;
  open_gz(g, path);
  const uint32_t rank = magic & 0xff;
  unsigned char head[4 + 4 * 3];
  size_t head_bytes = 4 + 4 * rank;
  size_t got = read_some(g, head, head_bytes, "the header");
  if (got < 4) fail(CTN_ERR_CORRUPT, "%s: truncated: %zu bytes, not even an IDX magic number", path.c_str(), got);
  uint32_t m = be32(head);
  if (m != magic) {
    if ((m >> 16) != 0)
      fail(CTN_ERR_CORRUPT, "%s: not an IDX file (magic 0x%08x, expected 0x%08x)", path.c_str(), m, magic);
    if (((m >> 8) & 0xff) != 0x08)
      fail(CTN_ERR_CORRUPT, "%s: IDX element type 0x%02x is not supported (only 0x08, u8)", path.c_str(),
           (m >> 8) & 0xff);
    fail(CTN_ERR_CORRUPT, "%s: IDX rank %u, expected %u (magic 0x%08x, expected 0x%08x)", path.c_str(), m & 0xff,
         rank, m, magic);
  }
  if (got < head_bytes)
    fail(CTN_ERR_CORRUPT, "%s: truncated header (%zu of %zu bytes)", path.c_str(), got, head_bytes);
  int64_t total = 1;
  for (uint32_t i = 0; i < rank; ++i) {
    dims[i] = be32(head + 4 + 4 * i);
    int64_t limit = i == 0 ? kMaxCount : kMaxSide;
    if (dims[i] > limit)
      fail(CTN_ERR_CORRUPT, "%s: dimension %u is %lld (limit %lld): corrupt header", path.c_str(), i,
           static_cast<long long>(dims[i]), static_cast<long long>(limit));
    if (i > 0 && dims[i] == 0) fail(CTN_ERR_CORRUPT, "%s: dimension %u is 0", path.c_str(), i);
    total *= dims[i];
    if (total > kMaxBytes)
      fail(CTN_ERR_CORRUPT, "%s: header promises more than %lld bytes: corrupt", path.c_str(),
           static_cast<long long>(kMaxBytes));
  }
  std::vector<uint8_t> data;
  size_t want = static_cast<size_t>(total);
  while (data.size() < want) {
    size_t old = data.size();
    size_t step = std::min(want - old, std::max(kChunk, old));  // doubling, bounded by `want`
    data.resize(old + step);
    size_t n = read_some(g, data.data() + old, step, "the data");
    if (n < step)
      fail(CTN_ERR_CORRUPT, "%s: truncated: the header promises %zu data bytes, the file holds %zu", path.c_str(),
           want, old + n);
  }
  unsigned char extra;
  if (read_some(g, &extra, 1, "the end of the file") != 0)
    fail(CTN_ERR_CORRUPT, "%s: trailing bytes after the %zu data bytes the header announces", path.c_str(), want);
  return data;
}

std::shared_ptr<Dataset> open_pair(const std::string &images, const std::string &labels) {
  auto ds = std::make_shared<Dataset>();
  int64_t idims[3] = {}, ldims[1] = {};
  ds->pixels = read_idx(images, kMagicImages, idims);
  ds->labels = read_idx(labels, kMagicLabels, ldims);
  if (idims[0] != ldims[0])
    fail(CTN_ERR_CORRUPT, "%s holds %lld images but %s holds %lld labels", images.c_str(),
         static_cast<long long>(idims[0]), labels.c_str(), static_cast<long long>(ldims[0]));
  ds->count = idims[0];
  ds->rows = static_cast<int32_t>(idims[1]);
  ds->cols = static_cast<int32_t>(idims[2]);
  uint8_t top = 0;
  for (uint8_t l : ds->labels) top = std::max(top, l);
  ds->num_classes = ds->count > 0 ? uint32_t{top} + 1 : 0;
  return ds;
}

bool exists(const std::string &p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0;
}

// Prefers the .gz file, as Debian installs it; falls back to an uncompressed copy.
std::string pick(const std::string &dir, const std::string &base, std::string *tried) {
  std::string gz = dir + "/" + base + ".gz";
  if (exists(gz)) return gz;
  std::string plain = dir + "/" + base;
  if (exists(plain)) return plain;
  *tried += (tried->empty() ? "" : ", ") + gz + " (or " + base + ")";
  return {};
}

}  // namespace

extern "C" {

CTN_API ctn_status ctn_dataset_open_idx(const char *images_path, const char *labels_path, ctn_dataset **out) {
  const char *ctn_io_fn = __func__;
  return wall([&] {
    CTN_IO_NEED(images_path);
    CTN_IO_NEED(labels_path);
    CTN_IO_NEED(out);
    auto ds = open_pair(images_path, labels_path);
    *out = new ctn_dataset{std::move(ds)};
  });
}

CTN_API ctn_status ctn_dataset_open_fashion_mnist(const char *data_dir, const char *split, ctn_dataset **out) {
  const char *ctn_io_fn = __func__;
  return wall([&] {
    CTN_IO_NEED(split);
    CTN_IO_NEED(out);
    std::string prefix;
    if (std::strcmp(split, "train") == 0) prefix = "train";
    else if (std::strcmp(split, "test") == 0) prefix = "t10k";
    else fail(CTN_ERR_INVALID_ARGUMENT, "ctn_dataset_open_fashion_mnist: split \"%s\" is not \"train\" or \"test\"", split);
    std::string dir = data_dir != nullptr && *data_dir ? data_dir : CTN_FASHION_MNIST_DIR;
    std::string tried;
    std::string images = pick(dir, prefix + "-images-idx3-ubyte", &tried);
    std::string labels = pick(dir, prefix + "-labels-idx1-ubyte", &tried);
    if (images.empty() || labels.empty())
      fail(CTN_ERR_IO, "Fashion-MNIST %s split not found: missing %s. %s", split, tried.c_str(), kPackageHint);
    std::shared_ptr<Dataset> ds;
    try {
      ds = open_pair(images, labels);
    } catch (const Error &e) {
      throw Error(e.code(), e.message() + ". " + kPackageHint);
    }
    if (ds->rows != 28 || ds->cols != 28)
      fail(CTN_ERR_CORRUPT, "%s: images are %dx%d, Fashion-MNIST's are 28x28", images.c_str(), ds->rows, ds->cols);
    for (int64_t i = 0; i < ds->count; ++i)
      if (ds->labels[static_cast<size_t>(i)] > 9)
        fail(CTN_ERR_CORRUPT, "%s: label %u at index %lld is out of Fashion-MNIST's range 0..9", labels.c_str(),
             ds->labels[static_cast<size_t>(i)], static_cast<long long>(i));
    ds->num_classes = 10;
    *out = new ctn_dataset{std::move(ds)};
  });
}

CTN_API void ctn_dataset_release(ctn_dataset *ds) { delete ds; }

CTN_API ctn_status ctn_dataset_info_get(const ctn_dataset *ds, ctn_dataset_info *out) {
  const char *ctn_io_fn = __func__;
  return wall([&] {
    CTN_IO_NEED(ds);
    CTN_IO_NEED(out);
    if (out->struct_size < offsetof(ctn_dataset_info, count))
      fail(CTN_ERR_INVALID_ARGUMENT, "ctn_dataset_info_get: struct_size %u is too small", out->struct_size);
    ctn_dataset_info info{};
    info.struct_size = out->struct_size;
    info.num_classes = ds->ds->num_classes;
    info.count = ds->ds->count;
    info.rows = ds->ds->rows;
    info.cols = ds->ds->cols;
    std::memcpy(out, &info, std::min<size_t>(out->struct_size, sizeof info));
  });
}

CTN_API ctn_status ctn_dataset_get(const ctn_dataset *ds, int64_t index, uint8_t *pixels, int32_t *out_label) {
  const char *ctn_io_fn = __func__;
  return wall([&] {
    CTN_IO_NEED(ds);
    const Dataset &d = *ds->ds;
    if (index < 0 || index >= d.count)
      fail(CTN_ERR_INVALID_ARGUMENT, "ctn_dataset_get: index %lld is outside 0..%lld", static_cast<long long>(index),
           static_cast<long long>(d.count - 1));
    if (pixels != nullptr)
      std::memcpy(pixels, d.pixels.data() + index * d.image_size(), static_cast<size_t>(d.image_size()));
    if (out_label != nullptr) *out_label = d.labels[static_cast<size_t>(index)];
  });
}

}  // extern "C"
