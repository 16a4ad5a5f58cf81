// libFuzzer target for the safetensors checkpoint reader (core/io/safetensors.cpp) through the
// public API: ctn_checkpoint_load on the input, then every tensor's info and data and the
// metadata read back. A hostile file is refused with a status; nothing may crash, read out of
// bounds or allocate more than the file holds. Corpus: tests/fuzz/corpus/safetensors.
#include <chutney/checkpoint.h>

#include "memfile.h"

#include <cstdio>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  MemFile f(data, size);
  if (!f.ok()) return 0;
  ctn_checkpoint *ck = nullptr;
  ctn_status s = ctn_checkpoint_load(f.path(), &ck);
  if (s == CTN_ERR_INTERNAL) {
    std::fprintf(stderr, "fuzz_safetensors: CTN_ERR_INTERNAL: %s\n", ctn_last_error());
    std::abort();
  }
  if (s != CTN_OK) return 0;
  uint32_t n = 0;
  if (ctn_checkpoint_count(ck, &n) == CTN_OK) {
    for (uint32_t i = 0; i < n; ++i) {
      const char *name = nullptr;
      if (ctn_checkpoint_name(ck, i, &name) != CTN_OK) continue;
      ctn_tensor *t = nullptr;
      if (ctn_checkpoint_get(ck, name, &t) == CTN_OK) ctn_tensor_release(t);
    }
  }
  const char *meta = nullptr;
  (void)ctn_checkpoint_metadata(ck, &meta);
  ctn_checkpoint_release(ck);
  return 0;
}
