// IDX format: a big-endian magic 0x000008TT0D (TT = element type, 0x08 = u8; D = rank), then D
// big-endian u32 dims, then the elements. Images are rank 3, labels rank 1.
#include "idx.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <sstream>

#include "cli.h"

namespace ctn_cli {
namespace {

constexpr uint32_t kMagicLabels = 0x00000801;  // u8, rank 1
constexpr uint32_t kMagicImages = 0x00000803;  // u8, rank 3
constexpr int64_t kMaxCount = 10'000'000;      // guards allocations against corrupt headers
constexpr int64_t kMaxSide = 4096;
constexpr const char *kMissingHint =
    "(it comes with the Debian package dataset-fashion-mnist: install it, or pass --data-dir)";
constexpr const char *kCorruptHint =
    "the file looks corrupt (reinstall the Debian package dataset-fashion-mnist, or pass "
    "--data-dir)";

struct GzCloser {
  void operator()(gzFile_s *f) const { gzclose(f); }
};
using GzPtr = std::unique_ptr<gzFile_s, GzCloser>;

[[noreturn]] void corrupt(const std::string &path, const std::string &why) {
  throw Failure(path + ": " + why + "; " + kCorruptHint);
}

GzPtr open_gz(const std::string &path) {
  errno = 0;
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) {
    std::string why = errno != 0 ? std::strerror(errno) : "cannot open";
    throw Failure("cannot open " + path + ": " + why + " " + kMissingHint);
  }
  return GzPtr(f);
}

// Reads exactly `n` bytes; a short read or a gzip error is reported as corruption.
void read_exact(gzFile f, const std::string &path, void *dst, size_t n, const char *what) {
  auto *p = static_cast<unsigned char *>(dst);
  size_t done = 0;
  while (done < n) {
    unsigned chunk = static_cast<unsigned>(std::min<size_t>(n - done, 1u << 30));
    int got = gzread(f, p + done, chunk);
    if (got < 0) {
      int errnum = 0;
      const char *msg = gzerror(f, &errnum);
      corrupt(path, std::string("gzip error while reading ") + what + ": " +
                        (msg ? msg : "unknown"));
    }
    if (got == 0) {
      std::ostringstream why;
      why << "truncated " << what << " (expected " << n << " bytes, got " << done << ")";
      corrupt(path, why.str());
    }
    done += static_cast<size_t>(got);
  }
}

uint32_t read_be32(gzFile f, const std::string &path, const char *what) {
  unsigned char b[4];
  read_exact(f, path, b, 4, what);
  return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | b[3];
}

void expect_end(gzFile f, const std::string &path) {
  unsigned char extra;
  int got = gzread(f, &extra, 1);
  if (got != 0) corrupt(path, got < 0 ? "gzip error at the end of the data"
                                      : "unexpected data after the last element");
}

std::string hex(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

void read_images(const std::string &path, ImageSet &set) {
  GzPtr f = open_gz(path);
  uint32_t magic = read_be32(f.get(), path, "header");
  if (magic != kMagicImages) {
    corrupt(path, "bad IDX magic " + hex(magic) + " (expected " + hex(kMagicImages) +
                      " for u8 images)");
  }
  int64_t count = read_be32(f.get(), path, "header");
  int64_t rows = read_be32(f.get(), path, "header");
  int64_t cols = read_be32(f.get(), path, "header");
  if (count <= 0 || count > kMaxCount || rows <= 0 || rows > kMaxSide || cols <= 0 ||
      cols > kMaxSide) {
    std::ostringstream why;
    why << "implausible image dims " << count << " x " << rows << " x " << cols;
    corrupt(path, why.str());
  }
  set.count = count;
  set.rows = rows;
  set.cols = cols;
  set.pixels.resize(static_cast<size_t>(count * rows * cols));
  read_exact(f.get(), path, set.pixels.data(), set.pixels.size(), "pixel data");
  expect_end(f.get(), path);
}

void read_labels(const std::string &path, ImageSet &set) {
  GzPtr f = open_gz(path);
  uint32_t magic = read_be32(f.get(), path, "header");
  if (magic != kMagicLabels) {
    corrupt(path, "bad IDX magic " + hex(magic) + " (expected " + hex(kMagicLabels) +
                      " for u8 labels)");
  }
  int64_t count = read_be32(f.get(), path, "header");
  if (count != set.count) {
    std::ostringstream why;
    why << "has " << count << " labels but the image file has " << set.count << " images";
    corrupt(path, why.str());
  }
  set.labels.resize(static_cast<size_t>(count));
  read_exact(f.get(), path, set.labels.data(), set.labels.size(), "label data");
  expect_end(f.get(), path);
  for (size_t i = 0; i < set.labels.size(); ++i) {
    if (set.labels[i] >= 10) {
      std::ostringstream why;
      why << "label " << int{set.labels[i]} << " at index " << i << " is not in [0, 10)";
      corrupt(path, why.str());
    }
  }
}

ImageSet load_split(const std::string &dir, const char *prefix) {
  ImageSet set;
  std::string base = dir + "/" + prefix;
  std::string images = base + "-images-idx3-ubyte.gz";
  read_images(images, set);
  if (set.rows != 28 || set.cols != 28) {
    std::ostringstream why;
    why << "images are " << set.rows << "x" << set.cols << ", expected 28x28";
    corrupt(images, why.str());
  }
  read_labels(base + "-labels-idx1-ubyte.gz", set);
  return set;
}

}  // namespace

FashionMnist load_fashion_mnist(const std::string &dir) {
  FashionMnist data;
  data.train = load_split(dir, "train");
  data.test = load_split(dir, "t10k");
  return data;
}

}  // namespace ctn_cli
