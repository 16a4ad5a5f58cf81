// TensorProto -> host tensor: dtype mapping, raw_data / typed fields / external data, every
// size checked. Kept apart from the importer so that the fuzz target links it without the graph.
#include "onnx/importer.h"

#include "util/files.h"
#include "util/status.h"

#include <chutney/desc.h>

#include <cmath>
#include <cstring>
#include <limits>

#include <unistd.h>

namespace ctn::onnx {

int32_t dtype_from_onnx(int32_t t) {
  switch (t) {
    case DT_FLOAT: return CTN_F32;
    case DT_DOUBLE: return CTN_F64;
    case DT_INT32: return CTN_I32;
    case DT_INT64: return CTN_I64;
    case DT_UINT8: return CTN_U8;
    case DT_BOOL: return CTN_BOOL;
    case DT_FLOAT16: return CTN_F16;
    case DT_BFLOAT16: return CTN_BF16;
    case DT_INT8: return CTN_I8;
    case DT_INT16: return CTN_I16;
    case DT_UINT16: return CTN_U16;
    case DT_UINT32: return CTN_U32;
    case DT_UINT64: return CTN_U64;
    case DT_FLOAT8E4M3FN:
    case DT_FLOAT8E4M3FNUZ:
    case DT_FLOAT8E5M2:
    case DT_FLOAT8E5M2FNUZ: return CTN_F16;  // carried as f16 (importer.h, Float8)
    default: return -1;
  }
}

const Float8 *float8_format(int32_t t) {
  static const Float8 kE4M3FN{3, 7, 448, false, false}, kE4M3FNUZ{3, 8, 240, true, false},
      kE5M2{2, 15, 57344, false, true}, kE5M2FNUZ{2, 16, 57344, true, false};
  switch (t) {
    case DT_FLOAT8E4M3FN: return &kE4M3FN;
    case DT_FLOAT8E4M3FNUZ: return &kE4M3FNUZ;
    case DT_FLOAT8E5M2: return &kE5M2;
    case DT_FLOAT8E5M2FNUZ: return &kE5M2FNUZ;
    default: return nullptr;
  }
}

double float8_value(uint8_t b, const Float8 &f) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (f.fnuz && b == 0x80) return nan;
  const int e = (b & 0x7f) >> f.mbits, m = b & ((1 << f.mbits) - 1), top = (1 << (7 - f.mbits)) - 1;
  if (f.has_inf && e == top) return m ? nan : (b & 0x80 ? -1 : 1) * std::numeric_limits<double>::infinity();
  if (!f.fnuz && !f.has_inf && e == top && m == (1 << f.mbits) - 1) return nan;  // E4M3FN's S.1111.111
  const double v = e == 0 ? std::ldexp(m, 1 - f.bias - f.mbits) : std::ldexp((1 << f.mbits) + m, e - f.bias - f.mbits);
  return b & 0x80 ? -v : v;
}

namespace {

std::string sv(std::string_view s) { return std::string(s); }

// External data: `location` relative to the model's directory, never escaping it.
std::string read_external(const TensorP &t, const std::string &base_dir, const std::string &what, size_t nbytes) {
  std::string location;
  long long offset = 0, length = -1;
  for (const auto &kv : t.external) {
    const std::string_view k = kv.first, v = kv.second;  // (lambdas cannot capture bindings in clang 15)
    auto num = [&](const char *key) {
      std::string s(v);
      char *end = nullptr;
      long long x = std::strtoll(s.c_str(), &end, 10);
      if (s.empty() || *end || x < 0)
        fail(CTN_ERR_CORRUPT, "%s: tensor '%s': external_data %s '%s' is not a non-negative integer", what.c_str(),
             sv(t.name).c_str(), key, s.c_str());
      return x;
    };
    if (k == "location") location = sv(v);
    else if (k == "offset") offset = num("offset");
    else if (k == "length") length = num("length");
  }
  if (location.empty())
    fail(CTN_ERR_CORRUPT, "%s: tensor '%s' has external data without a location", what.c_str(), sv(t.name).c_str());
  if (location[0] == '/' || location.find("..") != std::string::npos || location.find('\0') != std::string::npos)
    fail(CTN_ERR_CORRUPT, "%s: tensor '%s': external data location '%s' must be a relative path inside the model's "
         "directory", what.c_str(), sv(t.name).c_str(), location.c_str());
  std::string path = (base_dir.empty() ? std::string(".") : base_dir) + "/" + location;
  uint64_t usize = 0;
  ::close(open_regular_file(path, what + ": tensor '" + sv(t.name) + "': external data file", &usize));
  const auto size = static_cast<long long>(usize);
  if (length < 0) length = size - offset;
  if (offset > size || length > size - offset)
    fail(CTN_ERR_CORRUPT, "%s: tensor '%s': external range [%lld, %lld) is beyond the end of %s (%lld bytes)",
         what.c_str(), sv(t.name).c_str(), offset, offset + length, path.c_str(), size);
  if (static_cast<size_t>(length) != nbytes)
    fail(CTN_ERR_CORRUPT, "%s: tensor '%s': external data holds %lld bytes, the shape needs %zu", what.c_str(),
         sv(t.name).c_str(), length, nbytes);
  return read_regular_file(path, what + ": tensor '" + sv(t.name) + "': external data file", offset, length);
}

template <class Src>
void fill_from(Tensor &out, const std::vector<Src> &src, const TensorP &t, const std::string &what) {
  const size_t n = static_cast<size_t>(out.numel());
  if (src.size() != n)
    fail(CTN_ERR_CORRUPT, "%s: tensor '%s' has %zu values for shape %s", what.c_str(), sv(t.name).c_str(), src.size(),
         shape_str(out.shape).c_str());
  for (size_t k = 0; k < n; ++k) {
    switch (out.dtype) {
      case CTN_F32: reinterpret_cast<float *>(out.data())[k] = static_cast<float>(src[k]); break;
      case CTN_F64: reinterpret_cast<double *>(out.data())[k] = static_cast<double>(src[k]); break;
      case CTN_I32: reinterpret_cast<int32_t *>(out.data())[k] = static_cast<int32_t>(src[k]); break;
      case CTN_I64: reinterpret_cast<int64_t *>(out.data())[k] = static_cast<int64_t>(src[k]); break;
      case CTN_U8: reinterpret_cast<uint8_t *>(out.data())[k] = static_cast<uint8_t>(src[k]); break;
      case CTN_I8: reinterpret_cast<int8_t *>(out.data())[k] = static_cast<int8_t>(src[k]); break;
      // ONNX keeps INT16/UINT16 in int32_data, UINT32/UINT64 in uint64_data: values, converted
      // modulo 2^bits as protobuf's own readers do.
      case CTN_I16: reinterpret_cast<int16_t *>(out.data())[k] = static_cast<int16_t>(src[k]); break;
      case CTN_U16: reinterpret_cast<uint16_t *>(out.data())[k] = static_cast<uint16_t>(src[k]); break;
      case CTN_U32: reinterpret_cast<uint32_t *>(out.data())[k] = static_cast<uint32_t>(src[k]); break;
      case CTN_U64: reinterpret_cast<uint64_t *>(out.data())[k] = static_cast<uint64_t>(src[k]); break;
      // ONNX keeps 16-bit floats in int32_data as their bit patterns (the low 16 bits), not
      // as values: the bits are copied, never converted.
      case CTN_F16:
      case CTN_BF16: reinterpret_cast<uint16_t *>(out.data())[k] = static_cast<uint16_t>(src[k]); break;
      default: reinterpret_cast<uint8_t *>(out.data())[k] = src[k] != Src(0); break;
    }
  }
}

}  // namespace

Tensor tensor_from_proto(const TensorP &t, const std::string &base_dir, const std::string &what) {
  const int32_t dt = dtype_from_onnx(t.data_type);
  if (dt < 0)
    fail(CTN_ERR_UNSUPPORTED, "%s: tensor '%s' has dtype %s, which chutney does not have (float, double, "
         "float16, bfloat16, the float8 types (as float16), int8, int16, int32, int64, uint8, uint16, uint32, uint64 and bool are supported)", what.c_str(), sv(t.name).c_str(), data_type_name(t.data_type));
  if (t.dims.size() > CTN_MAX_DIMS)
    fail(CTN_ERR_UNSUPPORTED, "%s: tensor '%s' has %zu dims; chutney supports at most %d", what.c_str(), sv(t.name).c_str(),
         t.dims.size(), CTN_MAX_DIMS);
  if (t.has_segment) fail(CTN_ERR_UNSUPPORTED, "%s: tensor '%s' is segmented", what.c_str(), sv(t.name).c_str());
  Shape s;
  s.ndim = static_cast<uint32_t>(t.dims.size());
  int64_t numel = 1;
  for (uint32_t k = 0; k < s.ndim; ++k) {
    if (t.dims[k] < 0 || (t.dims[k] > 0 && numel > (int64_t{1} << 40) / t.dims[k]))
      fail(CTN_ERR_CORRUPT, "%s: tensor '%s' has an invalid or huge dimension %lld", what.c_str(), sv(t.name).c_str(),
           static_cast<long long>(t.dims[k]));
    s[k] = t.dims[k];
    numel *= t.dims[k];
  }
  // Every size is checked against the data actually present before anything is allocated, so a
  // hostile shape cannot make the reader allocate more than the file holds.
  const Float8 *f8 = float8_format(t.data_type);  // one byte per value in the file
  const size_t nbytes = static_cast<size_t>(numel) * (f8 ? 1 : dtype_size(dt));
  auto bad_size = [&](size_t have, const char *unit) {
    fail(CTN_ERR_CORRUPT, "%s: tensor '%s' has %zu %s of data; %s %s needs %zu", what.c_str(), sv(t.name).c_str(), have,
         unit, data_type_name(t.data_type), shape_str(s).c_str(), unit[0] == 'b' ? nbytes : static_cast<size_t>(numel));
  };
  auto from_bytes = [&](const char *p, size_t n) {
    if (n != nbytes) bad_size(n, "bytes");
    Tensor out = Tensor::empty(dt, s);
    if (f8) {
      for (size_t k = 0; k < n; ++k)
        reinterpret_cast<uint16_t *>(out.data())[k] = ctn_desc_f64_to_f16(float8_value(static_cast<uint8_t>(p[k]), *f8));
      return out;
    }
    if (n) std::memcpy(out.data(), p, n);
    if (dt == CTN_BOOL)
      for (size_t k = 0; k < n; ++k) reinterpret_cast<uint8_t *>(out.data())[k] = out.data()[k] != 0;
    return out;
  };
  auto typed = [&](const auto &src) {
    if (src.size() != static_cast<size_t>(numel)) bad_size(src.size(), "values");
    Tensor out = Tensor::empty(dt, s);
    fill_from(out, src, t, what);
    return out;
  };
  if (t.data_location == 1) {
    std::string buf = read_external(t, base_dir, what, nbytes);
    return from_bytes(buf.data(), buf.size());
  }
  if (t.has_raw) return from_bytes(t.raw.data(), t.raw.size());
  if (dt == CTN_F32) return typed(t.floats);
  if (dt == CTN_F64) return typed(t.doubles);
  if (dt == CTN_I64) return typed(t.int64s);
  if (dt == CTN_U32 || dt == CTN_U64) return typed(t.uint64s);
  if (f8) {  // int32_data holds each value's 8 bits
    if (t.int32s.size() != static_cast<size_t>(numel)) bad_size(t.int32s.size(), "values");
    std::string b(t.int32s.size(), '\0');
    for (size_t k = 0; k < b.size(); ++k) b[k] = static_cast<char>(t.int32s[k] & 0xff);
    return from_bytes(b.data(), b.size());
  }
  return typed(t.int32s);
}

}  // namespace ctn::onnx
