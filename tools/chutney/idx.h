// Reader for the IDX files of (Fashion-)MNIST, gzip-compressed or not (zlib reads both).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ctn_cli {

struct ImageSet {
  int64_t count = 0;
  int64_t rows = 0;
  int64_t cols = 0;
  std::vector<uint8_t> pixels;  // count * rows * cols, row-major
  std::vector<uint8_t> labels;  // count, each < 10
};

struct FashionMnist {
  ImageSet train;
  ImageSet test;
};

// Loads {train,t10k}-{images-idx3,labels-idx1}-ubyte.gz from `dir`. Throws Failure with a
// message naming the file and the Debian package dataset-fashion-mnist when a file is missing,
// unreadable or malformed (bad magic, dims, truncated data, labels out of range).
FashionMnist load_fashion_mnist(const std::string &dir);

// The default location of Debian's dataset-fashion-mnist.
inline constexpr const char *kDefaultFashionMnistDir = "/usr/share/datasets/fashion-mnist";

}  // namespace ctn_cli
