// A tiny protobuf writer for the tests: builds ONNX messages field by field, including the
// encodings a reader must accept (10-byte negative varints, unpacked repeated scalars, unknown
// fields), so that each test states exactly which bytes it feeds the importer.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

struct Pb {
  std::string b;

  Pb &varint(uint64_t v) {
    do {
      uint8_t byte = v & 0x7f;
      v >>= 7;
      b.push_back(static_cast<char>(byte | (v ? 0x80 : 0)));
    } while (v);
    return *this;
  }
  Pb &tag(uint32_t field, uint32_t wire) { return varint(static_cast<uint64_t>(field) << 3 | wire); }
  Pb &i(uint32_t field, int64_t v) { return tag(field, 0).varint(static_cast<uint64_t>(v)); }
  Pb &s(uint32_t field, std::string_view v) {
    tag(field, 2).varint(v.size());
    b.append(v);
    return *this;
  }
  Pb &m(uint32_t field, const Pb &msg) { return s(field, msg.b); }
  Pb &f(uint32_t field, float v) {
    tag(field, 5);
    char raw[4];
    std::memcpy(raw, &v, 4);
    b.append(raw, 4);
    return *this;
  }
  Pb &packed(uint32_t field, const std::vector<int64_t> &v) {
    Pb p;
    for (int64_t x : v) p.varint(static_cast<uint64_t>(x));
    return s(field, p.b);
  }
  Pb &unpacked(uint32_t field, const std::vector<int64_t> &v) {
    for (int64_t x : v) i(field, x);
    return *this;
  }
  // Fields no ONNX message defines: a reader must skip them by wire type.
  Pb &unknown() {
    i(1999, -5);
    s(1998, "ignored");
    tag(1997, 1);
    b.append(8, '\x11');
    tag(1996, 5);
    b.append(4, '\x22');
    return *this;
  }
};

// ONNX message builders (field numbers of onnx.proto3).
inline Pb tensor_f32(std::string_view name, std::vector<int64_t> dims, const std::vector<float> &v, bool raw) {
  Pb t;
  t.packed(1, dims).i(2, 1).s(8, name);
  if (raw) t.s(9, std::string_view(reinterpret_cast<const char *>(v.data()), v.size() * 4));
  else
    for (float x : v) t.f(4, x);  // unpacked float_data
  return t;
}

inline Pb value_info(std::string_view name, int32_t elem, const std::vector<int64_t> &dims,
                     const std::vector<std::string> &params = {}) {
  Pb shape;
  for (size_t k = 0; k < dims.size(); ++k) {
    Pb d;
    if (k < params.size() && !params[k].empty()) d.s(2, params[k]);
    else d.i(1, dims[k]);
    shape.m(1, d);
  }
  Pb tt;
  tt.i(1, elem).m(2, shape);
  Pb type;
  type.m(1, tt);
  Pb v;
  v.s(1, name).m(2, type);
  return v;
}

inline Pb attr_ints(std::string_view name, const std::vector<int64_t> &v) {
  Pb a;
  a.s(1, name).i(20, 7).unpacked(8, v);
  return a;
}

inline Pb node(std::string_view op, const std::vector<std::string> &in, const std::vector<std::string> &out,
               std::string_view name, const std::vector<Pb> &attrs = {}) {
  Pb n;
  for (auto &x : in) n.s(1, x);
  for (auto &x : out) n.s(2, x);
  n.s(3, name).s(4, op);
  for (auto &a : attrs) n.m(5, a);
  return n;
}

inline Pb model(const Pb &graph, int64_t opset = 17) {
  Pb op;
  op.s(1, "").i(2, opset);
  Pb m;
  m.i(1, 8).m(8, op).s(2, "chutney-test").m(7, graph);
  return m;
}
