#include "npy.h"

#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>

namespace ctn_cli {
namespace {

std::string slurp(const std::string &path) { return read_user_file(path); }

struct Descr {
  const char *code;
  ctn_dtype dtype;
};
// numpy has no bfloat16, so a bf16 tensor has no .npy form (npy_write refuses it by name).
const Descr kDescrs[] = {{"<f4", CTN_F32}, {"<f8", CTN_F64}, {"<i4", CTN_I32}, {"<i8", CTN_I64},
                         {"|u1", CTN_U8},  {"|b1", CTN_BOOL}, {"<f2", CTN_F16}, {"|i1", CTN_I8},
                         {"<u1", CTN_U8},  {"<b1", CTN_BOOL}, {"<i1", CTN_I8},
                         {"<i2", CTN_I16}, {"<u2", CTN_U16}, {"<u4", CTN_U32}, {"<u8", CTN_U64}};

// The value of 'key' in the header dict, as the text up to the next ',' at depth 0 or '}'.
std::string header_value(const std::string &h, const char *key, const std::string &what) {
  size_t k = h.find(std::string("'") + key + "'");
  if (k == std::string::npos) throw Failure(what + ": the .npy header has no '" + key + "'");
  size_t colon = h.find(':', k);
  if (colon == std::string::npos) throw Failure(what + ": malformed .npy header");
  size_t i = colon + 1, depth = 0;
  std::string v;
  for (; i < h.size(); ++i) {
    char ch = h[i];
    if (ch == '(') ++depth;
    if (ch == ')') --depth;
    if (depth == 0 && (ch == ',' || ch == '}')) break;
    v += ch;
  }
  size_t b = v.find_first_not_of(" "), e = v.find_last_not_of(" ");
  return b == std::string::npos ? "" : v.substr(b, e - b + 1);
}

uint32_t le32(const unsigned char *p) { return p[0] | p[1] << 8 | p[2] << 16 | static_cast<uint32_t>(p[3]) << 24; }
uint16_t le16(const unsigned char *p) { return static_cast<uint16_t>(p[0] | p[1] << 8); }

}  // namespace

TensorPtr npy_parse(const std::string &b, const std::string &what) {
  if (b.size() < 10 || std::memcmp(b.data(), "\x93NUMPY", 6) != 0) throw Failure(what + ": not a .npy file");
  const auto *u = reinterpret_cast<const unsigned char *>(b.data());
  const int major = u[6];
  size_t hlen, hstart;
  if (major == 1) hlen = le16(u + 8), hstart = 10;
  else if ((major == 2 || major == 3) && b.size() >= 12) hlen = le32(u + 8), hstart = 12;
  else throw Failure(what + ": unsupported .npy version " + std::to_string(major));
  if (hlen > b.size() - hstart) throw Failure(what + ": the .npy header runs past the end of the file");
  const std::string h = b.substr(hstart, hlen);
  std::string descr = header_value(h, "descr", what);
  if (descr.size() >= 2) descr = descr.substr(1, descr.size() - 2);  // strip quotes
  const Descr *d = nullptr;
  for (const Descr &x : kDescrs)
    if (descr == x.code) d = &x;
  if (!d) throw Failure(what + ": dtype '" + descr + "' is not one chutney has (<f4 <f8 <f2 <i4 <i8 |i1 |u1 |b1)");
  const bool fortran = header_value(h, "fortran_order", what) == "True";
  std::string sh = header_value(h, "shape", what);
  std::vector<int64_t> shape;
  if (sh.size() < 2 || sh.front() != '(' || sh.back() != ')') throw Failure(what + ": malformed shape " + sh);
  size_t pos = 1;
  while (pos < sh.size() - 1) {
    while (pos < sh.size() - 1 && (sh[pos] == ' ' || sh[pos] == ',')) ++pos;
    if (pos >= sh.size() - 1) break;
    char *end = nullptr;
    long long v = std::strtoll(sh.c_str() + pos, &end, 10);
    if (end == sh.c_str() + pos || v < 0) throw Failure(what + ": malformed shape " + sh);
    shape.push_back(v);
    pos = static_cast<size_t>(end - sh.c_str());
  }
  if (shape.size() > CTN_MAX_DIMS) throw Failure(what + ": more than 8 dims");
  // 64-bit arithmetic: on a 32-bit board size_t cannot even hold the 2^40 element bound.
  uint64_t numel = 1;
  for (int64_t v : shape) {
    if (v > 0 && numel > (uint64_t{1} << 40) / static_cast<uint64_t>(v)) throw Failure(what + ": the shape is too large");
    numel *= static_cast<uint64_t>(v);
  }
  const uint64_t bytes = numel * ctn_dtype_size(d->dtype);
  const size_t data = hstart + hlen;
  if (uint64_t{b.size() - data} < bytes) throw Failure(what + ": the data is shorter than the shape needs");
  if (!fortran) return make_tensor(d->dtype, shape, b.data() + data);
  // Fortran order: the data is the row-major layout of the reversed shape; transpose it back.
  std::vector<int64_t> rev(shape.rbegin(), shape.rend());
  TensorPtr t = make_tensor(d->dtype, rev, b.data() + data);
  std::vector<int32_t> perm;
  for (size_t k = 0; k < shape.size(); ++k) perm.push_back(static_cast<int32_t>(shape.size() - 1 - k));
  ctn_tensor *v = nullptr, *c = nullptr;
  check(ctn_tensor_permute(t.get(), perm.data(), &v), what.c_str());
  TensorPtr view(v);
  check(ctn_tensor_contiguous(view.get(), &c), what.c_str());
  return TensorPtr(c);
}

TensorPtr npy_read(const std::string &path) { return npy_parse(slurp(path), path); }

void npy_write(const std::string &path, const ctn_tensor *t) {
  ctn_dtype dt;
  uint32_t nd = 0;
  int64_t shape[CTN_MAX_DIMS];
  int64_t numel = 0;
  check(ctn_tensor_dtype(t, &dt), "ctn_tensor_dtype");
  check(ctn_tensor_shape(t, &nd, shape), "ctn_tensor_shape");
  check(ctn_tensor_numel(t, &numel), "ctn_tensor_numel");
  std::string descr;
  for (const Descr &x : kDescrs)
    if (x.dtype == dt && descr.empty()) descr = x.code;
  if (descr.empty())
    throw Failure(path + ": a " + ctn_dtype_name(dt) + " tensor has no .npy dtype (numpy has no bfloat16: cast it to f32 "
                  "or save a safetensors checkpoint)");
  std::string sh = "(";
  for (uint32_t k = 0; k < nd; ++k) sh += std::to_string(shape[k]) + (nd == 1 ? "," : k + 1 < nd ? ", " : "");
  sh += ")";
  std::string h = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + sh + ", }";
  while ((10 + h.size() + 1) % 64) h += ' ';
  h += '\n';
  std::vector<char> data(static_cast<size_t>(numel) * ctn_dtype_size(dt));
  check(ctn_tensor_read(t, data.data(), data.size()), "ctn_tensor_read");
  std::ofstream f(path, std::ios::binary);
  if (!f) throw Failure("cannot create " + path);
  const char magic[8] = {'\x93', 'N', 'U', 'M', 'P', 'Y', 1, 0};
  f.write(magic, 8);
  const unsigned char len[2] = {static_cast<unsigned char>(h.size() & 0xff), static_cast<unsigned char>(h.size() >> 8)};
  f.write(reinterpret_cast<const char *>(len), 2);
  f << h;
  f.write(data.data(), static_cast<std::streamsize>(data.size()));
  if (!f) throw Failure("cannot write " + path);
}

std::vector<std::pair<std::string, TensorPtr>> npz_read(const std::string &path) {
  const std::string z = slurp(path);
  const auto *u = reinterpret_cast<const unsigned char *>(z.data());
  const size_t n = z.size();
  // End of central directory: the last "PK\5\6" within the final 64 KiB + 22 bytes.
  size_t eocd = std::string::npos;
  for (size_t i = n >= 22 ? n - 22 : 0; n >= 22; --i) {
    if (le32(u + i) == 0x06054b50) {
      eocd = i;
      break;
    }
    if (i == 0 || n - i > 65557) break;
  }
  if (eocd == std::string::npos) throw Failure(path + ": not a zip (.npz) file");
  const uint16_t count = le16(u + eocd + 10);
  size_t cd = le32(u + eocd + 16);
  std::vector<std::pair<std::string, TensorPtr>> out;
  for (uint16_t e = 0; e < count; ++e) {
    if (cd + 46 > n || le32(u + cd) != 0x02014b50) throw Failure(path + ": corrupt zip central directory");
    const uint16_t method = le16(u + cd + 10), nlen = le16(u + cd + 28), xlen = le16(u + cd + 30), clen = le16(u + cd + 32);
    const uint32_t csize = le32(u + cd + 20), usize = le32(u + cd + 24), local = le32(u + cd + 42);
    if (cd + 46 + nlen > n) throw Failure(path + ": corrupt zip central directory");
    std::string name(z.data() + cd + 46, nlen);
    cd += 46 + nlen + xlen + clen;
    if (csize == 0xffffffffu || usize == 0xffffffffu || local == 0xffffffffu)
      throw Failure(path + ": member " + name + " needs zip64 sizes (over 4 GiB), which are not supported");
    if (static_cast<size_t>(local) + 30 > n || le32(u + local) != 0x04034b50) throw Failure(path + ": corrupt zip local header");
    const size_t data = local + 30 + le16(u + local + 26) + le16(u + local + 28);
    if (data > n || csize > n - data) throw Failure(path + ": member " + name + " runs past the end of the file");
    std::string bytes;
    if (method == 0) {
      bytes.assign(z.data() + data, csize);
    } else if (method == 8) {
      bytes.resize(usize);
      z_stream s{};
      if (inflateInit2(&s, -MAX_WBITS) != Z_OK) throw Failure("zlib: inflateInit2 failed");
      s.next_in = const_cast<Bytef *>(u + data);
      s.avail_in = csize;
      s.next_out = reinterpret_cast<Bytef *>(bytes.data());
      s.avail_out = usize;
      int r = inflate(&s, Z_FINISH);
      inflateEnd(&s);
      if (r != Z_STREAM_END || s.total_out != usize) throw Failure(path + ": member " + name + " does not inflate");
    } else {
      throw Failure(path + ": member " + name + " uses zip compression method " + std::to_string(method));
    }
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".npy") == 0) name.resize(name.size() - 4);
    out.emplace_back(name, npy_parse(bytes, path + ":" + name));
  }
  return out;
}

}  // namespace ctn_cli
