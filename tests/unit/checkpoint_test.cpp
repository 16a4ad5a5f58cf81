// Checkpoints: safetensors round trips of every dtype, the exact file layout, atomic saves,
// hand-made corrupt files with precise messages, fuzzing, and plan variable save/restore.
#include <chutney/checkpoint.h>
#include <gtest/gtest.h>

#include "test_helpers.h"

#include <csignal>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <random>
#include <cstdlib>
#include <string>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

extern "C" int ctn_io_headers_c99_check(void);  // io_headers_c99.c: the headers compile as C99

namespace {

using Bytes = std::vector<char>;

std::string make_tmpdir() { return scratch_dir("ctn_ckpt_test"); }

Bytes slurp(const std::string &p) {
  std::ifstream i(p, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(i), {});
}

void spit(const std::string &p, const Bytes &b) {
  std::ofstream o(p, std::ios::binary | std::ios::trunc);
  o.write(b.data(), static_cast<std::streamsize>(b.size()));
}

// A file with the given header text and data section.
Bytes raw(const std::string &header, const Bytes &data) {
  Bytes b(8);
  uint64_t n = header.size();
  for (int k = 0; k < 8; ++k) b[static_cast<size_t>(k)] = static_cast<char>(n >> (8 * k));
  b.insert(b.end(), header.begin(), header.end());
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

std::vector<std::string> dir_entries(const std::string &dir) {
  std::vector<std::string> out;
  if (DIR *d = opendir(dir.c_str())) {
    while (dirent *e = readdir(d))
      if (std::strcmp(e->d_name, ".") && std::strcmp(e->d_name, "..")) out.push_back(e->d_name);
    closedir(d);
  }
  return out;
}

ctn_tensor *make(ctn_dtype dt, std::vector<int64_t> shape, const void *data) {
  ctn_tensor *t = nullptr;
  EXPECT_EQ(ctn_tensor_create(dt, static_cast<uint32_t>(shape.size()), shape.data(), data, &t), CTN_OK)
      << ctn_last_error();
  return t;
}

Bytes contents(const ctn_tensor *t) {
  const std::vector<unsigned char> b = tensor_bytes(t);
  return Bytes(b.begin(), b.end());
}

TEST(Checkpoint, HeadersCompileAsC99) { EXPECT_EQ(ctn_io_headers_c99_check(), 0); }

TEST(Checkpoint, RoundTripOfEveryDtypeAndLayout) {
  std::string dir = make_tmpdir(), path = dir + "/all.safetensors";
  float f32[6] = {1.5f, -2.25f, 3e-38f, 1e30f, -0.0f, 7};
  double f64[3] = {3.141592653589793, -1e-300, 2.5};
  int32_t i32[4] = {-2147483647 - 1, 2147483647, 0, -5};
  int64_t i64[2] = {INT64_MIN, 0x0123456789abcdefLL};
  uint8_t u8[5] = {0, 1, 127, 128, 255};
  uint8_t bl[3] = {1, 0, 1};
  float scalar = 42.0f;
  std::vector<ctn_tensor *> ts = {
      make(CTN_F32, {2, 3}, f32), make(CTN_F64, {3}, f64),       make(CTN_I32, {2, 2}, i32),
      make(CTN_I64, {2}, i64),    make(CTN_U8, {5}, u8),         make(CTN_BOOL, {3, 1}, bl),
      make(CTN_F32, {}, &scalar), make(CTN_F32, {0, 4}, nullptr),
  };
  // A non-contiguous view is written row-major.
  int32_t perm[2] = {1, 0};
  ctn_tensor *view = nullptr;
  CTN_ASSERT_OK(ctn_tensor_permute(ts[0], perm, &view));
  ts.push_back(view);
  const char *names[] = {"w.f32", "f64", "i32", "i64", "u8 with space", "bool", "scalar", "empty", "view \"T\"\n"};
  const uint32_t n = static_cast<uint32_t>(ts.size());
  CTN_ASSERT_OK(ctn_checkpoint_save(path.c_str(), n, names, ts.data(), "{\"epoch\": \"3\", \"note\": \"caf\\u00e9\"}"));

  // Layout: u64 header length, multiple of 8, header starts with '{', data follows.
  Bytes file = slurp(path);
  ASSERT_GE(file.size(), 8u);
  uint64_t hl = 0;
  for (int k = 7; k >= 0; --k) hl = (hl << 8) | static_cast<uint8_t>(file[static_cast<size_t>(k)]);
  EXPECT_EQ(hl % 8, 0u);
  ASSERT_LE(8 + hl, file.size());
  EXPECT_EQ(file[8], '{');
  std::string header(file.data() + 8, hl);
  EXPECT_NE(header.find("\"dtype\":\"BOOL\""), std::string::npos) << header;
  EXPECT_NE(header.find("\"__metadata__\":{\"epoch\":\"3\""), std::string::npos) << header;
  // The f32 tensor comes first, so its bytes start the data section (little-endian).
  EXPECT_EQ(0, std::memcmp(file.data() + 8 + hl, f32, sizeof f32));
  EXPECT_TRUE(dir_entries(dir) == std::vector<std::string>{"all.safetensors"});  // no temp left

  ctn_checkpoint *ck = nullptr;
  CTN_ASSERT_OK(ctn_checkpoint_load(path.c_str(), &ck));
  uint32_t count = 0;
  CTN_ASSERT_OK(ctn_checkpoint_count(ck, &count));
  ASSERT_EQ(count, n);
  for (uint32_t i = 0; i < n; ++i) {
    SCOPED_TRACE(names[i]);
    const char *nm = nullptr;
    CTN_ASSERT_OK(ctn_checkpoint_name(ck, i, &nm));
    EXPECT_STREQ(nm, names[i]);
    ctn_tensor *t = nullptr;
    CTN_ASSERT_OK(ctn_checkpoint_get(ck, names[i], &t));
    ctn_dtype a{}, b{};
    ctn_tensor_dtype(t, &a);
    ctn_tensor_dtype(ts[i], &b);
    EXPECT_EQ(a, b);
    uint32_t na = 0, nb = 0;
    int64_t sa[8], sb[8];
    ctn_tensor_shape(t, &na, sa);
    ctn_tensor_shape(ts[i], &nb, sb);
    ASSERT_EQ(na, nb);
    EXPECT_TRUE(std::equal(sa, sa + na, sb));
    EXPECT_EQ(contents(t), contents(ts[i]));  // bitwise, -0.0 and denormals included
    ctn_dtype idt{};
    uint32_t ind = 0;
    int64_t ish[8];
    CTN_ASSERT_OK(ctn_checkpoint_info(ck, names[i], &idt, &ind, ish));
    EXPECT_EQ(idt, b);
    EXPECT_EQ(ind, nb);
    ctn_tensor_release(t);
  }
  const char *meta = nullptr, *v = nullptr;
  CTN_ASSERT_OK(ctn_checkpoint_metadata(ck, &meta));
  EXPECT_STREQ(meta, "{\"epoch\":\"3\",\"note\":\"caf\xc3\xa9\"}");
  CTN_ASSERT_OK(ctn_checkpoint_metadata_get(ck, "epoch", &v));
  EXPECT_STREQ(v, "3");
  CTN_ASSERT_OK(ctn_checkpoint_metadata_get(ck, "missing", &v));
  EXPECT_EQ(v, nullptr);
  ctn_tensor *none = nullptr;
  EXPECT_EQ(ctn_checkpoint_get(ck, "nope", &none), CTN_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(ctn_last_error()).find("\"nope\""), std::string::npos) << ctn_last_error();
  EXPECT_NE(std::string(ctn_last_error()).find("ctn_checkpoint_get: "), std::string::npos) << ctn_last_error();
  EXPECT_EQ(ctn_checkpoint_name(ck, n, &meta), CTN_ERR_INVALID_ARGUMENT);
  ctn_checkpoint_release(ck);
  ctn_checkpoint_release(nullptr);
  for (auto *t : ts) ctn_tensor_release(t);
}

TEST(Checkpoint, EmptyCheckpointAndNoMetadata) {
  std::string path = make_tmpdir() + "/empty.safetensors";
  CTN_ASSERT_OK(ctn_checkpoint_save(path.c_str(), 0, nullptr, nullptr, nullptr));
  ctn_checkpoint *ck = nullptr;
  CTN_ASSERT_OK(ctn_checkpoint_load(path.c_str(), &ck));
  uint32_t n = 9;
  CTN_ASSERT_OK(ctn_checkpoint_count(ck, &n));
  EXPECT_EQ(n, 0u);
  const char *meta = nullptr;
  CTN_ASSERT_OK(ctn_checkpoint_metadata(ck, &meta));
  EXPECT_STREQ(meta, "{}");
  ctn_checkpoint_release(ck);
}

TEST(Checkpoint, SaveRejectsBadArgumentsWithoutTouchingTheFile) {
  std::string dir = make_tmpdir(), path = dir + "/x.safetensors";
  float v = 1;
  ctn_tensor *t = make(CTN_F32, {1}, &v);
  const ctn_tensor *two[2] = {t, t};
  struct Case {
    std::vector<const char *> names;
    const char *meta;
    const char *needle;
  };
  std::vector<Case> cases = {
      {{"a", "a"}, nullptr, "repeats"},
      {{"a", ""}, nullptr, "empty"},
      {{"a", "__metadata__"}, nullptr, "reserved"},
      {{"a", "\xff"}, nullptr, "UTF-8"},
      {{"a", "b"}, "[1]", "not a JSON object"},
      {{"a", "b"}, "{\"k\": 1}", "not a string"},
      {{"a", "b"}, "{\"k\": \"v\"", "not valid JSON"},
  };
  for (const auto &c : cases) {
    EXPECT_EQ(ctn_checkpoint_save(path.c_str(), 2, c.names.data(), two, c.meta), CTN_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(ctn_last_error()).find(c.needle), std::string::npos) << ctn_last_error();
    EXPECT_TRUE(dir_entries(dir).empty());
  }
  EXPECT_EQ(ctn_checkpoint_save(nullptr, 0, nullptr, nullptr, nullptr), CTN_ERR_INVALID_ARGUMENT);
  std::string nodir = dir + "/missing/x.safetensors";
  const char *nm[1] = {"a"};
  EXPECT_EQ(ctn_checkpoint_save(nodir.c_str(), 1, nm, two, nullptr), CTN_ERR_IO);
  EXPECT_NE(std::string(ctn_last_error()).find(dir + "/missing"), std::string::npos) << ctn_last_error();
  ctn_tensor_release(t);
}

// Saves v1, then makes a second save fail half-way: the old file must be intact and no
// temporary file may remain.
TEST(Checkpoint, FailingSaveLeavesTheOldFileIntact) {
  std::string dir = make_tmpdir(), path = dir + "/model.safetensors";
  std::vector<float> small(16, 1.0f), big(1 << 20, 2.0f);  // 4 MiB
  ctn_tensor *a = make(CTN_F32, {16}, small.data()), *b = make(CTN_F32, {1 << 20}, big.data());
  const char *nm[1] = {"w"};
  CTN_ASSERT_OK(ctn_checkpoint_save(path.c_str(), 1, nm, &a, "{\"v\":\"1\"}"));
  const Bytes before = slurp(path);

  // A file-size limit makes write() fail with EFBIG part-way, as a full disk would; it works
  // even as root, where a read-only directory does not stop anything.
  struct rlimit old {};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit lim = old;
  lim.rlim_cur = 1 << 20;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &lim), 0);
  ctn_status st = ctn_checkpoint_save(path.c_str(), 1, nm, &b, "{\"v\":\"2\"}");
  std::string msg = ctn_last_error();
  setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_EQ(st, CTN_ERR_IO) << msg;
  EXPECT_NE(msg.find("cannot write"), std::string::npos) << msg;
  EXPECT_TRUE(slurp(path) == before);
  EXPECT_TRUE(dir_entries(dir) == std::vector<std::string>{"model.safetensors"});

  // An unwritable directory (only meaningful when not root).
  if (geteuid() != 0) {
    ASSERT_EQ(chmod(dir.c_str(), 0555), 0);
    EXPECT_EQ(ctn_checkpoint_save(path.c_str(), 1, nm, &b, nullptr), CTN_ERR_IO);
    chmod(dir.c_str(), 0755);
    EXPECT_TRUE(slurp(path) == before);
  }
  // And a successful save replaces it completely.
  CTN_ASSERT_OK(ctn_checkpoint_save(path.c_str(), 1, nm, &b, nullptr));
  ctn_checkpoint *ck = nullptr;
  CTN_ASSERT_OK(ctn_checkpoint_load(path.c_str(), &ck));
  ctn_tensor *w = nullptr;
  CTN_ASSERT_OK(ctn_checkpoint_get(ck, "w", &w));
  int64_t numel = 0;
  ctn_tensor_numel(w, &numel);
  EXPECT_EQ(numel, 1 << 20);
  ctn_tensor_release(w);
  ctn_checkpoint_release(ck);
  ctn_tensor_release(a);
  ctn_tensor_release(b);
}

struct Corrupt {
  const char *what;
  Bytes file;
  const char *needle;
};

TEST(Checkpoint, CorruptFilesGivePreciseErrors) {
  const Bytes d8(8, 0), d12(12, 0);
  auto e = [](const char *body) { return std::string(body); };
  Bytes huge_len(8, 0);
  huge_len[7] = 0x10;  // 2^60
  Bytes beyond = raw(e("{}"), {});
  beyond[0] = 100;
  std::vector<Corrupt> cases = {
      {"short file", Bytes{1, 2, 3}, "shorter than the 8-byte header length"},
      {"huge header length", huge_len, "exceeds the 100 MB limit"},
      {"header beyond file", beyond, "beyond the end of the file"},
      {"not an object", raw("[1, 2]  ", {}), "does not start with '{'"},
      {"invalid json", raw("{\"a\": {\"dtype\": \"F32\",}", d8), "invalid JSON header"},
      {"trailing json", raw("{} {}", {}), "unexpected data after"},
      {"unknown dtype", raw(e(R"({"a":{"dtype":"F33","shape":[2],"data_offsets":[0,8]}})"), d8), "unknown dtype \"F33\""},
      {"missing key", raw(e(R"({"a":{"dtype":"F32","shape":[2]}})"), d8), "lacks dtype, shape or data_offsets"},
      {"extra key", raw(e(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}})"), d8), "keys other than"},
      {"negative dim", raw(e(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})"), d8), "not a non-negative integer"},
      {"float dim", raw(e(R"({"a":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})"), d8), "not a non-negative integer"},
      {"shape mismatch", raw(e(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})"), d8), "needs 12 bytes but data_offsets span 8"},
      {"giant shape", raw(e(R"({"a":{"dtype":"F64","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,8]}})"), d8), "more than 2^64 bytes"},
      {"offsets out of range", raw(e(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}})"), d8), "beyond the data section of 8 bytes"},
      {"reversed offsets", raw(e(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})"), d8), "reversed"},
      {"overlap", raw(e(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})"), d12), "overlap"},
      {"gap", raw(e(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})"), d12), "gap in the data section"},
      {"uncovered tail", raw(e(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})"), d12), "the tensors cover 8"},
      {"duplicate names", raw(e(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})"), d8), "duplicate key \"a\""},
      {"metadata not strings", raw(e(R"({"__metadata__":{"k":3}})"), {}), "is not a string"},
      {"bad escape", raw(e(R"({"a\q":{}})"), {}), "unknown escape"},
      {"lone surrogate", raw(e(R"({"\udc00":{}})"), {}), "surrogate"},
      {"bad utf8", raw(e("{\"\xc3\x28\":{}}"), {}), "invalid UTF-8"},
      {"deep nesting", raw("{\"a\":" + std::string(200, '[') + std::string(200, ']') + "}", {}), "nesting too deep"},
  };
  std::string dir = make_tmpdir(), path = dir + "/bad.safetensors";
  for (const auto &c : cases) {
    SCOPED_TRACE(c.what);
    spit(path, c.file);
    ctn_checkpoint *ck = nullptr;
    EXPECT_EQ(ctn_checkpoint_load(path.c_str(), &ck), CTN_ERR_CORRUPT) << ctn_last_error();
    EXPECT_EQ(ck, nullptr);
    std::string msg = ctn_last_error();
    EXPECT_NE(msg.find(c.needle), std::string::npos) << msg;
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
  }
  ctn_checkpoint *ck = nullptr;
  EXPECT_EQ(ctn_checkpoint_load((dir + "/absent").c_str(), &ck), CTN_ERR_IO);
  EXPECT_EQ(ctn_checkpoint_load(dir.c_str(), &ck), CTN_ERR_IO);
  EXPECT_NE(std::string(ctn_last_error()).find("not a regular file"), std::string::npos) << ctn_last_error();
}

TEST(Checkpoint, UnsupportedDtypeLoadsButCannotBeFetched) {
  std::string path = make_tmpdir() + "/f8.safetensors";
  spit(path, raw(R"({"h":{"dtype":"F8_E5M2","shape":[4],"data_offsets":[0,4]},"f":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                 Bytes{0, 60, 0, 64, 0, 0, static_cast<char>(0x80), 63}));
  ctn_checkpoint *ck = nullptr;
  CTN_ASSERT_OK(ctn_checkpoint_load(path.c_str(), &ck));
  ctn_tensor *t = nullptr;
  EXPECT_EQ(ctn_checkpoint_get(ck, "h", &t), CTN_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(ctn_last_error()).find("F8_E5M2"), std::string::npos) << ctn_last_error();
  EXPECT_NE(std::string(ctn_last_error()).find("\"h\""), std::string::npos) << ctn_last_error();
  EXPECT_EQ(ctn_checkpoint_info(ck, "h", nullptr, nullptr, nullptr), CTN_ERR_UNSUPPORTED);
  CTN_ASSERT_OK(ctn_checkpoint_get(ck, "f", &t));
  float v = 0;
  ctn_tensor_read(t, &v, 4);
  EXPECT_EQ(v, 1.0f);
  ctn_tensor_release(t);
  ctn_checkpoint_release(ck);
}

// F16, BF16 and I8 (ABI 1.5) in a file written byte by byte as the safetensors package lays it
// out: each loads as its chutney dtype with the file's bits (NaN payloads, -0, subnormals and
// infinities included), saves back to the same bytes, and a size that does not fit the 2- or
// 1-byte element is refused naming the dtype.
TEST(Checkpoint, ReducedPrecisionDtypesAreBitExact) {
  const std::string dir = make_tmpdir(), path = dir + "/half.safetensors";
  // f16: 1, -2, 65504 (max), 2^-24 (smallest subnormal), -0, +inf, a NaN with a payload.
  const uint16_t f16[7] = {0x3c00, 0xc000, 0x7bff, 0x0001, 0x8000, 0x7c00, 0x7e01};
  // bf16: 1, -2, the largest finite, the smallest subnormal, -0, -inf, a signalling-NaN pattern.
  const uint16_t bf16[7] = {0x3f80, 0xc000, 0x7f7f, 0x0001, 0x8000, 0xff80, 0x7f81};
  const int8_t i8[4] = {-128, -1, 0, 127};
  Bytes data;
  auto put = [&](const void *p, size_t n) { data.insert(data.end(), static_cast<const char *>(p), static_cast<const char *>(p) + n); };
  put(f16, sizeof f16);
  put(bf16, sizeof bf16);
  put(i8, sizeof i8);
  data.resize(data.size() + 2);  // a second, 1-element BF16 tensor at the end: 1.5
  const uint16_t one_half = 0x3fc0;
  std::memcpy(data.data() + 32, &one_half, 2);
  std::string header = R"({"h":{"dtype":"F16","shape":[7],"data_offsets":[0,14]},)"
                       R"("b":{"dtype":"BF16","shape":[7,1],"data_offsets":[14,28]},)"
                       R"("q":{"dtype":"I8","shape":[2,2],"data_offsets":[28,32]},)"
                       R"("s":{"dtype":"BF16","shape":[],"data_offsets":[32,34]}})";
  spit(path, raw(header, data));
  ctn_checkpoint *ck = nullptr;
  CTN_ASSERT_OK(ctn_checkpoint_load(path.c_str(), &ck));
  struct Want {
    const char *name;
    ctn_dtype dt;
    std::vector<int64_t> shape;
    Bytes bytes;
  };
  auto bytes_of = [](const void *p, size_t n) { return Bytes(static_cast<const char *>(p), static_cast<const char *>(p) + n); };
  const Want want[] = {{"h", CTN_F16, {7}, bytes_of(f16, sizeof f16)},
                       {"b", CTN_BF16, {7, 1}, bytes_of(bf16, sizeof bf16)},
                       {"q", CTN_I8, {2, 2}, bytes_of(i8, sizeof i8)},
                       {"s", CTN_BF16, {}, bytes_of(&one_half, 2)}};
  std::vector<ctn_tensor *> loaded;
  for (const Want &w : want) {
    SCOPED_TRACE(w.name);
    ctn_dtype dt{};
    uint32_t nd = 9;
    int64_t sh[8];
    CTN_ASSERT_OK(ctn_checkpoint_info(ck, w.name, &dt, &nd, sh));
    EXPECT_EQ(dt, w.dt);
    EXPECT_EQ(std::vector<int64_t>(sh, sh + nd), w.shape);
    ctn_tensor *t = nullptr;
    CTN_ASSERT_OK(ctn_checkpoint_get(ck, w.name, &t));
    ctn_tensor_dtype(t, &dt);
    EXPECT_EQ(dt, w.dt);
    EXPECT_EQ(contents(t), w.bytes);
    loaded.push_back(t);
  }
  ctn_checkpoint_release(ck);

  // Saved again in the same order, the data section is the original byte for byte and the
  // header names the safetensors dtypes.
  const std::string again = dir + "/again.safetensors";
  const char *names[] = {"h", "b", "q", "s"};
  CTN_ASSERT_OK(ctn_checkpoint_save(again.c_str(), 4, names, loaded.data(), nullptr));
  for (auto *t : loaded) ctn_tensor_release(t);
  Bytes file = slurp(again);
  ASSERT_GE(file.size(), 8u + data.size());
  uint64_t hl = 0;
  for (int k = 7; k >= 0; --k) hl = (hl << 8) | static_cast<uint8_t>(file[static_cast<size_t>(k)]);
  std::string h2(file.data() + 8, hl);
  for (const char *dt : {"\"dtype\":\"F16\"", "\"dtype\":\"BF16\"", "\"dtype\":\"I8\""})
    EXPECT_NE(h2.find(dt), std::string::npos) << h2;
  EXPECT_EQ(Bytes(file.begin() + static_cast<std::ptrdiff_t>(8 + hl), file.end()), data);

  // A 2-byte dtype with an odd span, and an I8 tensor whose span is too long.
  for (auto [hdr, needle] : {std::pair<std::string, const char *>{R"({"h":{"dtype":"F16","shape":[3],"data_offsets":[0,5]}})",
                                                                "[3] of F16 needs 6 bytes but data_offsets span 5"},
                             {R"({"q":{"dtype":"I8","shape":[4],"data_offsets":[0,5]}})", "[4] of I8 needs 4 bytes"},
                             {R"({"b":{"dtype":"BF16","shape":[3],"data_offsets":[0,6]}})", "beyond the data section"}}) {
    SCOPED_TRACE(hdr);
    spit(path, raw(hdr, Bytes(5, 0)));
    EXPECT_EQ(ctn_checkpoint_load(path.c_str(), &ck), CTN_ERR_CORRUPT);
    EXPECT_NE(std::string(ctn_last_error()).find(needle), std::string::npos) << ctn_last_error();
  }
}

// Random truncations, bit flips and byte overwrites (mostly in the header, where parsing
// happens): every load is OK or CTN_ERR_CORRUPT, and an accepted file's tensors can be fetched.
TEST(Checkpoint, FuzzNeverCrashes) {
  std::string dir = make_tmpdir(), path = dir + "/f.safetensors";
  float f[6] = {1, 2, 3, 4, 5, 6};
  int64_t g[3] = {7, 8, 9};
  uint8_t h[5] = {1, 0, 1, 1, 0};
  ctn_tensor *ts[3] = {make(CTN_F32, {2, 3}, f), make(CTN_I64, {3}, g), make(CTN_BOOL, {5}, h)};
  const char *names[3] = {"a", "bb", "c"};
  CTN_ASSERT_OK(ctn_checkpoint_save(path.c_str(), 3, names, ts, "{\"k\":\"v\"}"));
  const Bytes good = slurp(path);
  uint64_t hl = static_cast<uint8_t>(good[0]);
  std::mt19937 rng(77);
  int accepted = 0, rejected = 0;
  for (int it = 0; it < 1000; ++it) {
    Bytes b = good;
    switch (it % 5) {
      case 0: b.resize(rng() % b.size()); break;
      case 1: b[rng() % (8 + hl)] ^= static_cast<char>(1 << (rng() % 8)); break;
      case 2: b[8 + rng() % hl] = "{}[]\",:0123456789-.eE\\u \x01\xff"[rng() % 27]; break;
      case 3: b[rng() % b.size()] = static_cast<char>(rng()); break;
      default: {
        size_t at = 8 + rng() % hl;
        b.erase(b.begin() + static_cast<long>(at), b.begin() + static_cast<long>(std::min<size_t>(b.size(), at + 1 + rng() % 4)));
        break;
      }
    }
    spit(path, b);
    ctn_checkpoint *ck = nullptr;
    ctn_status st = ctn_checkpoint_load(path.c_str(), &ck);
    ASSERT_TRUE(st == CTN_OK || st == CTN_ERR_CORRUPT) << st << ": " << ctn_last_error();
    if (st != CTN_OK) {
      ++rejected;
      continue;
    }
    ++accepted;
    uint32_t n = 0;
    CTN_ASSERT_OK(ctn_checkpoint_count(ck, &n));
    for (uint32_t i = 0; i < n; ++i) {
      const char *nm = nullptr;
      CTN_ASSERT_OK(ctn_checkpoint_name(ck, i, &nm));
      ctn_tensor *t = nullptr;
      ctn_status gs = ctn_checkpoint_get(ck, nm, &t);
      EXPECT_TRUE(gs == CTN_OK || gs == CTN_ERR_UNSUPPORTED || gs == CTN_ERR_SHAPE) << ctn_last_error();
      ctn_tensor_release(t);
    }
    ctn_checkpoint_release(ck);
  }
  EXPECT_GT(rejected, 500);
  EXPECT_GT(accepted, 5);  // flips in the data section are legitimately accepted
  for (auto *t : ts) ctn_tensor_release(t);
}

// ---------------------------------------------------------------------------------------------
// Plans
// ---------------------------------------------------------------------------------------------

// loss = mean(tanh(x @ w + b)^2) with an SGD step, as in exec_test.
struct Trainer {
  Ctx c;
  ctn_graph *g = nullptr;
  ctn_plan *p = nullptr;
  ctn_node x{}, w{}, b{}, loss{};
  ctn_tensor *xt = nullptr, *out = nullptr;
  Trainer() {
    EXPECT_EQ(ctn_graph_create(c.ctx, 0, &g), CTN_OK);
    int64_t xs[2] = {4, 3};
    EXPECT_EQ(ctn_input(g, "x", CTN_F32, 2, xs, &x), CTN_OK);
    ctn_tensor *w0 = make_f32({3, 2}, {0.5f, -0.5f, 0.25f, 0.75f, -1.0f, 0.1f}), *b0 = make_f32({2}, {0.1f, -0.1f});
    EXPECT_EQ(ctn_variable(g, "w", w0, &w), CTN_OK);
    EXPECT_EQ(ctn_variable(g, "b", b0, &b), CTN_OK);
    ctn_tensor_release(w0);
    ctn_tensor_release(b0);
    ctn_node m, s, t, sq, lr, sw, sb, nw, nb, uw, ub, gr[2], wrt[2] = {w, b};
    EXPECT_EQ(ctn_matmul(g, x, w, 0, 0, &m), CTN_OK);
    EXPECT_EQ(ctn_add(g, m, b, &s), CTN_OK);
    EXPECT_EQ(ctn_tanh(g, s, &t), CTN_OK);
    EXPECT_EQ(ctn_mul(g, t, t, &sq), CTN_OK);
    EXPECT_EQ(ctn_mean(g, sq, 0, nullptr, 0, &loss), CTN_OK);
    EXPECT_EQ(ctn_grad(g, loss, 2, wrt, gr), CTN_OK) << ctn_last_error();
    EXPECT_EQ(ctn_scalar(g, CTN_F32, 0.5, &lr), CTN_OK);
    EXPECT_EQ(ctn_mul(g, gr[0], lr, &sw), CTN_OK);
    EXPECT_EQ(ctn_sub(g, w, sw, &nw), CTN_OK);
    EXPECT_EQ(ctn_mul(g, gr[1], lr, &sb), CTN_OK);
    EXPECT_EQ(ctn_sub(g, b, sb, &nb), CTN_OK);
    EXPECT_EQ(ctn_assign(g, w, nw, &uw), CTN_OK);
    EXPECT_EQ(ctn_assign(g, b, nb, &ub), CTN_OK);
    EXPECT_EQ(ctn_plan_compile(g, 1, &loss, nullptr, &p), CTN_OK) << ctn_last_error();
    xt = make_f32({4, 3}, {1, 2, -1, 0.5f, -0.5f, 2, 0, 1, 1, -2, 0.25f, 0.75f});
    EXPECT_EQ(ctn_plan_output_create(p, 0, &out), CTN_OK);
  }
  ~Trainer() {
    ctn_tensor_release(xt);
    ctn_tensor_release(out);
    ctn_plan_release(p);
    ctn_graph_release(g);
  }
  float step() {
    const ctn_tensor *feeds[1] = {xt};
    EXPECT_EQ(ctn_plan_run(p, 1, &x, feeds, 1, &out), CTN_OK) << ctn_last_error();
    return read_f32(out)[0];
  }
};

TEST(Checkpoint, PlanVariablesResumeTheSameTrajectory) {
  std::string dir = make_tmpdir(), path = dir + "/plan.safetensors";
  Trainer t;
  const char *names[2] = {"layer.w", "layer.b"};
  ctn_node nodes[2] = {t.w, t.b};
  for (int i = 0; i < 3; ++i) t.step();
  CTN_ASSERT_OK(ctn_plan_save_variables(t.p, 2, names, nodes, path.c_str(), "{\"step\":\"3\"}"));
  std::vector<float> uninterrupted;
  for (int i = 0; i < 5; ++i) uninterrupted.push_back(t.step());

  // A fresh plan (initial weights) resumed from the checkpoint follows the same losses.
  Trainer r;
  ctn_node rnodes[2] = {r.w, r.b};
  CTN_ASSERT_OK(ctn_plan_load_variables(r.p, 2, names, rnodes, path.c_str()));
  std::vector<float> resumed;
  for (int i = 0; i < 5; ++i) resumed.push_back(r.step());
  EXPECT_EQ(resumed, uninterrupted);
  ctn_checkpoint *ck = nullptr;
  CTN_ASSERT_OK(ctn_checkpoint_load(path.c_str(), &ck));
  const char *step = nullptr;
  CTN_ASSERT_OK(ctn_checkpoint_metadata_get(ck, "step", &step));
  EXPECT_STREQ(step, "3");
  ctn_checkpoint_release(ck);
}

TEST(Checkpoint, PlanLoadChecksNamesDtypesAndShapesBeforeWriting) {
  std::string dir = make_tmpdir();
  Trainer t;
  ctn_node nodes[2] = {t.w, t.b};
  const char *names[2] = {"w", "b"};
  auto save = [&](const std::string &file, ctn_tensor *w, ctn_tensor *b, const char *wname = "w") {
    const char *nm[2] = {wname, "b"};
    const ctn_tensor *ts[2] = {w, b};
    EXPECT_EQ(ctn_checkpoint_save(file.c_str(), 2, nm, ts, nullptr), CTN_OK) << ctn_last_error();
  };
  ctn_tensor *w_ok = make_f32({3, 2}, {9, 9, 9, 9, 9, 9}), *b_ok = make_f32({2}, {9, 9});
  ctn_tensor *w_shape = make_f32({2, 3}, {1, 2, 3, 4, 5, 6});
  double d[6] = {};
  ctn_tensor *w_f64 = make(CTN_F64, {3, 2}, d);
  save(dir + "/shape", w_shape, b_ok);
  save(dir + "/dtype", w_f64, b_ok);
  save(dir + "/name", w_ok, b_ok, "weight");
  const float before = t.step();
  ctn_tensor *w_before = nullptr;
  CTN_ASSERT_OK(ctn_plan_variable_read(t.p, t.w, &w_before));

  // b comes second and would load fine; the failure on w must leave both untouched.
  const char *rev_names[2] = {"b", "w"};
  ctn_node rev_nodes[2] = {t.b, t.w};
  EXPECT_EQ(ctn_plan_load_variables(t.p, 2, rev_names, rev_nodes, (dir + "/shape").c_str()), CTN_ERR_SHAPE);
  std::string msg = ctn_last_error();
  EXPECT_NE(msg.find("f32 [2, 3]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("f32 [3, 2]"), std::string::npos) << msg;
  EXPECT_EQ(ctn_plan_load_variables(t.p, 2, names, nodes, (dir + "/dtype").c_str()), CTN_ERR_DTYPE);
  msg = ctn_last_error();
  EXPECT_NE(msg.find("f64 [3, 2]"), std::string::npos) << msg;
  EXPECT_EQ(ctn_plan_load_variables(t.p, 2, names, nodes, (dir + "/name").c_str()), CTN_ERR_INVALID_ARGUMENT);
  msg = ctn_last_error();
  EXPECT_NE(msg.find("no tensor named \"w\""), std::string::npos) << msg;
  EXPECT_EQ(ctn_plan_load_variables(t.p, 2, names, nodes, (dir + "/absent").c_str()), CTN_ERR_IO);

  ctn_tensor *w_after = nullptr, *b_after = nullptr;
  CTN_ASSERT_OK(ctn_plan_variable_read(t.p, t.w, &w_after));
  CTN_ASSERT_OK(ctn_plan_variable_read(t.p, t.b, &b_after));
  EXPECT_EQ(read_f32(w_after), read_f32(w_before));
  EXPECT_NE(read_f32(b_after), std::vector<float>({9, 9}));
  (void)before;
  for (auto *x : {w_ok, b_ok, w_shape, w_f64, w_before, w_after, b_after}) ctn_tensor_release(x);
}

}  // namespace
