// libFuzzer target for the IDX dataset reader with its gzip path (core/io/idx.cpp) through the
// public API: the input is split in two at its first byte's position and the halves are the
// images and labels files (a leading 0x1f 0x8b makes a half gzip). Opening either refuses the
// input with a status or yields a dataset whose every sample is then read. Nothing may crash or
// allocate beyond the data present. Corpus: tests/fuzz/corpus/idx.
#include <chutney/data.h>

#include "memfile.h"

#include <cstdio>
#include <cstdlib>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2) return 0;
  size_t cut = 1 + (data[0] * (size - 1)) / 255;
  MemFile images(data + 1, cut - 1), labels(data + cut, size - cut);
  if (!images.ok() || !labels.ok()) return 0;
  ctn_dataset *ds = nullptr;
  ctn_status s = ctn_dataset_open_idx(images.path(), labels.path(), &ds);
  if (s == CTN_ERR_INTERNAL) {
    std::fprintf(stderr, "fuzz_idx: CTN_ERR_INTERNAL: %s\n", ctn_last_error());
    std::abort();
  }
  if (s != CTN_OK) return 0;
  ctn_dataset_info info{};
  info.struct_size = sizeof info;
  if (ctn_dataset_info_get(ds, &info) == CTN_OK && info.count > 0 && info.count <= 4096) {
    std::vector<uint8_t> px(static_cast<size_t>(info.rows) * static_cast<size_t>(info.cols));
    for (int64_t i = 0; i < info.count; ++i) {
      int32_t label = 0;
      (void)ctn_dataset_get(ds, i, px.data(), &label);
    }
  }
  ctn_dataset_release(ds);
  return 0;
}
