// In-memory image-classification dataset shared by the IDX reader and the loader.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace ctn::io {

struct Dataset {
  int64_t count = 0;
  int32_t rows = 0;
  int32_t cols = 0;
  uint32_t num_classes = 0;
  std::vector<uint8_t> pixels;  // count * rows * cols, row-major per image
  std::vector<uint8_t> labels;  // count
  int64_t image_size() const { return static_cast<int64_t>(rows) * cols; }
};

}  // namespace ctn::io

// The handle is one reference: loaders keep the dataset alive after the caller releases it.
struct ctn_dataset {
  std::shared_ptr<const ctn::io::Dataset> ds;
};
