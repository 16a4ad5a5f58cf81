// Helper of safetensors_interop.py: `write PATH` saves a checkpoint with every chutney dtype;
// `check PATH` loads one written by the Python safetensors package and compares it with the
// values the script promises. For safetensors_lowp_interop.py (PyTorch's f16/bf16/i8): `dump
// PATH` prints every tensor's values, `resave IN OUT` loads and saves. Exit status 0 on
// success, 1 with a message otherwise.
#include <chutney/checkpoint.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

int failures = 0;

void expect(bool ok, const std::string &what) {
  if (!ok) {
    std::fprintf(stderr, "MISMATCH: %s\n", what.c_str());
    ++failures;
  }
}

ctn_tensor *make(ctn_dtype dt, std::vector<int64_t> shape, const void *data) {
  ctn_tensor *t = nullptr;
  if (ctn_tensor_create(dt, static_cast<uint32_t>(shape.size()), shape.data(), data, &t) != CTN_OK) {
    std::fprintf(stderr, "ctn_tensor_create: %s\n", ctn_last_error());
    std::exit(1);
  }
  return t;
}

int write(const char *path) {
  float f32[6];
  for (int i = 0; i < 6; ++i) f32[i] = static_cast<float>(i) * 0.5f - 1.0f;
  double f64[4] = {0.0, 1.0 / 3.0, 2.0 / 3.0, 1.0};
  int32_t i32[3] = {-1, 0, 2147483647};
  int64_t i64[2] = {-(int64_t{1} << 62), 12345678901LL};
  uint8_t u8[4] = {0, 1, 254, 255};
  uint8_t bl[3] = {1, 0, 1};
  float scalar = 3.25f;
  const uint16_t f16[4] = {0x3c00, 0xb800, 0x7bff, 0x0001};  // 1, -0.5, 65504, 2^-24
  const int8_t i8[3] = {-128, 5, 127};
  ctn_tensor *ts[9] = {make(CTN_F32, {2, 3}, f32), make(CTN_F64, {4}, f64), make(CTN_I32, {3}, i32),
                       make(CTN_I64, {2}, i64),    make(CTN_U8, {2, 2}, u8), make(CTN_BOOL, {3}, bl),
                       make(CTN_F32, {}, &scalar), make(CTN_F16, {2, 2}, f16), make(CTN_I8, {3}, i8)};
  const char *names[9] = {"f32", "f64", "i32", "i64", "u8", "bool", "scalar", "f16", "i8"};
  ctn_status s = ctn_checkpoint_save(path, 9, names, ts, "{\"framework\": \"chutney\", \"epoch\": \"2\"}");
  for (auto *t : ts) ctn_tensor_release(t);
  if (s != CTN_OK) {
    std::fprintf(stderr, "ctn_checkpoint_save: %s\n", ctn_last_error());
    return 1;
  }
  return 0;
}

// Loads `path` and counts its tensors; NULL (with the message printed) when it cannot.
ctn_checkpoint *open_checkpoint(const char *path, uint32_t *count) {
  ctn_checkpoint *ck = nullptr;
  if (ctn_checkpoint_load(path, &ck) != CTN_OK) {
    std::fprintf(stderr, "ctn_checkpoint_load: %s\n", ctn_last_error());
    return nullptr;
  }
  ctn_checkpoint_count(ck, count);
  return ck;
}

template <class T>
std::vector<T> get(ctn_checkpoint *ck, const char *name, ctn_dtype want_dt, std::vector<int64_t> want_shape) {
  ctn_tensor *t = nullptr;
  if (ctn_checkpoint_get(ck, name, &t) != CTN_OK) {
    expect(false, std::string(name) + ": " + ctn_last_error());
    return {};
  }
  ctn_dtype dt{};
  uint32_t nd = 0;
  int64_t shape[CTN_MAX_DIMS];
  int64_t n = 0;
  ctn_tensor_dtype(t, &dt);
  ctn_tensor_shape(t, &nd, shape);
  ctn_tensor_numel(t, &n);
  expect(dt == want_dt, std::string(name) + ": dtype " + ctn_dtype_name(dt));
  expect(std::vector<int64_t>(shape, shape + nd) == want_shape, std::string(name) + ": shape");
  std::vector<T> v(static_cast<size_t>(n));
  ctn_tensor_read(t, v.data(), v.size() * sizeof(T));
  ctn_tensor_release(t);
  return v;
}

int check(const char *path) {
  uint32_t count = 0;
  ctn_checkpoint *ck = open_checkpoint(path, &count);
  if (!ck) return 1;
  expect(count == 8, "count " + std::to_string(count));
  auto alpha = get<float>(ck, "alpha", CTN_F32, {3, 4});
  for (size_t i = 0; i < alpha.size(); ++i) expect(alpha[i] == static_cast<float>(i) * 0.25f - 1.0f, "alpha[" + std::to_string(i) + "]");
  auto beta = get<double>(ck, "beta", CTN_F64, {2, 2});
  const double beta_want[4] = {1e-300, -2.0, M_PI, 0.0};
  for (size_t i = 0; i < beta.size() && i < 4; ++i) expect(beta[i] == beta_want[i], "beta[" + std::to_string(i) + "]");
  auto gamma = get<int64_t>(ck, "gamma", CTN_I64, {5});
  for (size_t i = 0; i < gamma.size(); ++i) expect(gamma[i] == -3 * static_cast<int64_t>(i), "gamma");
  auto delta = get<int32_t>(ck, "delta", CTN_I32, {2});
  expect(delta == std::vector<int32_t>({7, -7}), "delta");
  auto eps = get<uint8_t>(ck, "eps", CTN_U8, {3, 1});
  expect(eps == std::vector<uint8_t>({3, 2, 1}), "eps");
  auto flag = get<uint8_t>(ck, "flag", CTN_BOOL, {2});
  expect(flag == std::vector<uint8_t>({1, 0}), "flag");
  auto half = get<uint16_t>(ck, "half", CTN_F16, {3});  // numpy's float16 of 1.5, -65504, 1e-7
  expect(half == std::vector<uint16_t>({0x3e00, 0xfbff, 0x0002}), "half");
  auto small = get<int8_t>(ck, "small", CTN_I8, {2, 2});
  expect(small == std::vector<int8_t>({-128, -1, 0, 127}), "small");
  const char *src = nullptr;
  ctn_checkpoint_metadata_get(ck, "source", &src);
  expect(src != nullptr && std::strcmp(src, "numpy") == 0, "metadata source");
  ctn_checkpoint_release(ck);
  return failures == 0 ? 0 : 1;
}

// IEEE binary16 and bfloat16 bit patterns to float, written out from the formats' definitions
// (independent of any library's conversion, so that the script can check the values' meaning).
double half_value(uint16_t h) {
  const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (e == 0x1f) return m ? NAN : sign * INFINITY;
  if (e == 0) return sign * std::ldexp(m, -24);
  return sign * std::ldexp(1024 + m, e - 25);
}
double bf16_value(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// `dump PATH`: one line per tensor, "name dtype [shape] v0 v1 ..." with every value printed
// exactly (%.17g), for the reduced-precision interop script to compare with PyTorch.
int dump(const char *path) {
  uint32_t count = 0;
  ctn_checkpoint *ck = open_checkpoint(path, &count);
  if (!ck) return 1;
  for (uint32_t i = 0; i < count && failures == 0; ++i) {
    const char *name = nullptr;
    ctn_checkpoint_name(ck, i, &name);
    ctn_tensor *t = nullptr;
    if (ctn_checkpoint_get(ck, name, &t) != CTN_OK) {
      expect(false, std::string(name) + ": " + ctn_last_error());
      break;
    }
    ctn_dtype dt{};
    uint32_t nd = 0;
    int64_t shape[CTN_MAX_DIMS], n = 0;
    ctn_tensor_dtype(t, &dt);
    ctn_tensor_shape(t, &nd, shape);
    ctn_tensor_numel(t, &n);
    std::vector<unsigned char> raw(static_cast<size_t>(n) * ctn_dtype_size(dt));
    ctn_tensor_read(t, raw.data(), raw.size());
    ctn_tensor_release(t);
    std::printf("%s %s [", name, ctn_dtype_name(dt));
    for (uint32_t k = 0; k < nd; ++k) std::printf("%s%lld", k ? "," : "", static_cast<long long>(shape[k]));
    std::printf("]");
    for (int64_t k = 0; k < n; ++k) {
      double v = 0;
      uint16_t h = 0;
      if (dt == CTN_F16 || dt == CTN_BF16) std::memcpy(&h, raw.data() + 2 * k, 2);
      if (dt == CTN_F16) v = half_value(h);
      else if (dt == CTN_BF16) v = bf16_value(h);
      else if (dt == CTN_I8) v = static_cast<int8_t>(raw[static_cast<size_t>(k)]);
      else if (dt == CTN_F32) v = reinterpret_cast<const float *>(raw.data())[k];
      else expect(false, std::string(name) + ": dtype " + ctn_dtype_name(dt) + " is not dumped");
      std::printf(" %.17g", v);
    }
    std::printf("\n");
  }
  ctn_checkpoint_release(ck);
  return failures == 0 ? 0 : 1;
}

// `resave IN OUT`: every tensor of IN saved to OUT in IN's order, through chutney tensors.
int resave(const char *in, const char *out) {
  uint32_t count = 0;
  ctn_checkpoint *ck = open_checkpoint(in, &count);
  if (!ck) return 1;
  std::vector<const char *> names(count);
  std::vector<ctn_tensor *> ts(count, nullptr);
  ctn_status s = CTN_OK;
  for (uint32_t i = 0; i < count && s == CTN_OK; ++i) {
    ctn_checkpoint_name(ck, i, &names[i]);
    s = ctn_checkpoint_get(ck, names[i], &ts[i]);
  }
  if (s == CTN_OK) s = ctn_checkpoint_save(out, count, names.data(), ts.data(), nullptr);
  if (s != CTN_OK) std::fprintf(stderr, "resave: %s\n", ctn_last_error());
  for (auto *t : ts) ctn_tensor_release(t);
  ctn_checkpoint_release(ck);
  return s == CTN_OK ? 0 : 1;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc == 3 && std::strcmp(argv[1], "write") == 0) return write(argv[2]);
  if (argc == 3 && std::strcmp(argv[1], "check") == 0) return check(argv[2]);
  if (argc == 3 && std::strcmp(argv[1], "dump") == 0) return dump(argv[2]);
  if (argc == 4 && std::strcmp(argv[1], "resave") == 0) return resave(argv[2], argv[3]);
  std::fprintf(stderr, "usage: %s write|check|dump PATH | resave IN OUT\n", argv[0]);
  return 2;
}
