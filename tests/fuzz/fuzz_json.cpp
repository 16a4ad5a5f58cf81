// libFuzzer target for the strict JSON reader of safetensors headers (core/io/json.cpp): any
// text parses or is refused with a message; a parsed document written back parses again to the
// same text. Nothing may crash or recurse without bound. Corpus: tests/fuzz/corpus/json.
#include "io/json.h"

#include <cstdio>
#include <cstdlib>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view text(reinterpret_cast<const char *>(data), size);
  ctn::io::Json doc;
  std::string error;
  if (!ctn::io::json_parse(text, &doc, &error)) {
    if (error.empty()) {
      std::fprintf(stderr, "fuzz_json: refused without a message\n");
      std::abort();
    }
    return 0;
  }
  std::string once, twice;
  ctn::io::json_write(once, doc);
  ctn::io::Json again;
  if (!ctn::io::json_parse(once, &again, &error)) {
    std::fprintf(stderr, "fuzz_json: its own output does not parse: %s\n", error.c_str());
    std::abort();
  }
  ctn::io::json_write(twice, again);
  if (once != twice) {
    std::fprintf(stderr, "fuzz_json: writing is not stable\n");
    std::abort();
  }
  return 0;
}
