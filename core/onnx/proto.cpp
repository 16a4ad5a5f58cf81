// Protobuf wire-format reader for the ONNX messages of proto.h. Field numbers are those of
// onnx/onnx.proto3 (ONNX IR version 10); fields the importer does not use are skipped like
// unknown ones, so files from newer exporters still load.
#include "onnx/proto.h"

#include "util/status.h"

#include <cstdio>
#include <cstring>

namespace ctn::onnx {

const char *data_type_name(int32_t dt) {
  static const char *const names[] = {"UNDEFINED", "FLOAT",  "UINT8",  "INT8",      "UINT16",     "INT16",
                                      "INT32",     "INT64",  "STRING", "BOOL",      "FLOAT16",    "DOUBLE",
                                      "UINT32",    "UINT64", "COMPLEX64", "COMPLEX128", "BFLOAT16",
                                      "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "UINT4",
                                      "INT4", "FLOAT4E2M1", "FLOAT8E8M0"};
  if (dt >= 0 && dt < static_cast<int32_t>(sizeof names / sizeof names[0])) return names[dt];
  thread_local char buf[32];
  std::snprintf(buf, sizeof buf, "type %d", dt);
  return buf;
}

namespace {

enum Wire : uint32_t { kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5 };

// Nested graphs (If/Loop bodies, graph attributes) recurse; hostile input must not overflow the
// stack, and no real model nests anywhere near this deep.
constexpr int kMaxDepth = 64;

struct Source {
  const uint8_t *begin;
  const std::string *what;
};

class Reader {
 public:
  Reader(const Source &src, const uint8_t *p, const uint8_t *end, const char *msg, int depth)
      : src_(src), p_(p), end_(end), msg_(msg), depth_(depth) {
    if (depth_ > kMaxDepth) bad("messages nested more than %d deep", kMaxDepth);
  }

  bool next() {
    if (p_ >= end_) return false;
    uint64_t tag = varint();
    field_ = static_cast<uint32_t>(tag >> 3);
    wire_ = static_cast<uint32_t>(tag & 7);
    if (field_ == 0 || tag >> 32) bad("invalid field tag %llu", static_cast<unsigned long long>(tag));
    return true;
  }
  uint32_t field() const { return field_; }
  uint32_t wire() const { return wire_; }

  uint64_t varint() {
    uint64_t v = 0;
    for (int k = 0; k < 10; ++k) {
      if (p_ >= end_) bad("truncated varint");
      uint8_t b = *p_++;
      if (k == 9 && b > 1) bad("varint overflows 64 bits");
      v |= static_cast<uint64_t>(b & 0x7f) << (7 * k);
      if (!(b & 0x80)) return v;
    }
    bad("varint longer than 10 bytes");
  }

  // Scalar accessors check the wire type of the current field.
  int64_t i64() {
    expect(kVarint);
    return static_cast<int64_t>(varint());
  }
  int32_t i32() { return static_cast<int32_t>(i64()); }  // int32 fields are sign-extended varints
  float f32() {
    expect(kFixed32);
    return as<float>(take(4));
  }
  std::string_view bytes() {
    expect(kBytes);
    uint64_t n = varint();
    if (n > static_cast<uint64_t>(end_ - p_))
      bad("length %llu exceeds the %lld bytes left", static_cast<unsigned long long>(n),
          static_cast<long long>(end_ - p_));
    const uint8_t *s = take(static_cast<size_t>(n));
    return {reinterpret_cast<const char *>(s), static_cast<size_t>(n)};
  }
  Reader sub(const char *msg) {
    std::string_view b = bytes();
    auto *s = reinterpret_cast<const uint8_t *>(b.data());
    return Reader(src_, s, s + b.size(), msg, depth_ + 1);
  }

  // Repeated scalar fields, packed (one length-delimited run) or not (one value per tag).
  template <class T>
  void repeated_varint(std::vector<T> &out) {
    if (wire_ == kBytes) {
      Reader r = sub(msg_);
      while (r.p_ < r.end_) out.push_back(static_cast<T>(r.varint()));
    } else {
      out.push_back(static_cast<T>(i64()));
    }
  }
  template <class T>
  void repeated_fixed(std::vector<T> &out) {
    constexpr uint32_t w = sizeof(T) == 4 ? kFixed32 : kFixed64;
    if (wire_ == kBytes) {
      std::string_view b = bytes();
      if (b.size() % sizeof(T)) bad("packed run of %zu bytes is not a multiple of %zu", b.size(), sizeof(T));
      size_t n0 = out.size();
      out.resize(n0 + b.size() / sizeof(T));
      if (!b.empty()) std::memcpy(out.data() + n0, b.data(), b.size());  // little-endian host
    } else {
      expect(w);
      out.push_back(as<T>(take(sizeof(T))));
    }
  }

  void skip() {
    switch (wire_) {
      case kVarint: varint(); break;
      case kFixed64: take(8); break;
      case kFixed32: take(4); break;
      case kBytes: bytes(); break;
      default: bad("unsupported wire type %u (groups are not used by ONNX)", wire_);
    }
  }

  int depth() const { return depth_; }

  [[noreturn]] __attribute__((format(printf, 2, 3))) void bad(const char *fmt, ...) const {
    va_list ap;
    va_start(ap, fmt);
    std::string m = vformat(fmt, ap);
    va_end(ap);
    fail(CTN_ERR_CORRUPT, "%s: malformed ONNX protobuf in %s (field %u, byte %lld): %s", src_.what->c_str(), msg_,
         field_, static_cast<long long>(p_ - src_.begin), m.c_str());
  }

 private:
  void expect(uint32_t w) {
    if (wire_ != w) bad("wire type %u where %u was expected", wire_, w);
  }
  const uint8_t *take(size_t n) {
    if (n > static_cast<size_t>(end_ - p_)) bad("truncated: %zu bytes needed, %lld left", n, static_cast<long long>(end_ - p_));
    const uint8_t *s = p_;
    p_ += n;
    return s;
  }
  template <class T>
  static T as(const uint8_t *p) {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }

  Source src_;
  const uint8_t *p_, *end_;
  const char *msg_;
  int depth_;
  uint32_t field_ = 0, wire_ = 0;
};

void read_graph(Reader r, GraphP &g);

void read_tensor(Reader r, TensorP &t) {
  while (r.next()) {
    switch (r.field()) {
      case 1: r.repeated_varint(t.dims); break;
      case 2: t.data_type = r.i32(); break;
      case 3: t.has_segment = true; r.skip(); break;
      case 4: r.repeated_fixed(t.floats); break;
      case 5: r.repeated_varint(t.int32s); break;
      case 6: t.strings.push_back(r.bytes()); break;
      case 7: r.repeated_varint(t.int64s); break;
      case 8: t.name = r.bytes(); break;
      case 9: t.raw = r.bytes(); t.has_raw = true; break;
      case 10: r.repeated_fixed(t.doubles); break;
      case 11: r.repeated_varint(t.uint64s); break;
      case 13: {
        Reader e = r.sub("StringStringEntryProto");
        std::pair<std::string_view, std::string_view> kv;
        while (e.next()) {
          if (e.field() == 1) kv.first = e.bytes();
          else if (e.field() == 2) kv.second = e.bytes();
          else e.skip();
        }
        t.external.push_back(kv);
        break;
      }
      case 14: t.data_location = r.i32(); break;
      default: r.skip();
    }
  }
}

void read_value_info(Reader r, ValueInfoP &v) {
  while (r.next()) {
    if (r.field() == 1) {
      v.name = r.bytes();
    } else if (r.field() == 2) {  // TypeProto
      Reader tp = r.sub("TypeProto");
      while (tp.next()) {
        if (tp.field() != 1) {  // sequence, map, optional, sparse: not a plain tensor
          tp.skip();
          continue;
        }
        v.is_tensor = true;
        Reader tt = tp.sub("TypeProto.Tensor");
        while (tt.next()) {
          if (tt.field() == 1) {
            v.elem_type = tt.i32();
          } else if (tt.field() == 2) {
            v.has_shape = true;
            Reader sh = tt.sub("TensorShapeProto");
            while (sh.next()) {
              if (sh.field() != 1) {
                sh.skip();
                continue;
              }
              Reader d = sh.sub("TensorShapeProto.Dimension");
              int64_t value = -1;
              std::string_view param;
              while (d.next()) {
                if (d.field() == 1) value = d.i64();
                else if (d.field() == 2) param = d.bytes();
                else d.skip();
              }
              if (value < -1) value = -1;
              v.dims.push_back(value);
              v.dim_params.push_back(param);
            }
          } else {
            tt.skip();
          }
        }
      }
    } else {
      r.skip();
    }
  }
}

void read_attribute(Reader r, AttributeP &a) {
  while (r.next()) {
    const uint32_t f = r.field();
    if (f < 32) a.fields_seen |= 1u << f;
    switch (f) {
      case 1: a.name = r.bytes(); break;
      case 2: a.f = r.f32(); break;
      case 3: a.i = r.i64(); break;
      case 4: a.s = r.bytes(); break;
      case 5: a.t = std::make_unique<TensorP>(); read_tensor(r.sub("TensorProto"), *a.t); break;
      case 6: a.g = std::make_unique<GraphP>(); read_graph(r.sub("GraphProto"), *a.g); break;
      case 7: r.repeated_fixed(a.floats); break;
      case 8: r.repeated_varint(a.ints); break;
      case 9: a.strings.push_back(r.bytes()); break;
      case 10: a.tensors.emplace_back(); read_tensor(r.sub("TensorProto"), a.tensors.back()); break;
      case 11: a.graphs.emplace_back(); read_graph(r.sub("GraphProto"), a.graphs.back()); break;
      case 20: a.type = r.i32(); break;
      case 21: a.ref_attr_name = r.bytes(); break;
      default: r.skip();
    }
  }
  // Files from before IR version 2 have no type field: infer it from the one value present.
  if (a.type == AT_UNDEFINED) {
    static const std::pair<uint32_t, int32_t> by_field[] = {{2, AT_FLOAT},   {3, AT_INT},      {4, AT_STRING},
                                                            {5, AT_TENSOR},  {6, AT_GRAPH},    {7, AT_FLOATS},
                                                            {8, AT_INTS},    {9, AT_STRINGS},  {10, AT_TENSORS},
                                                            {11, AT_GRAPHS}};
    for (auto [field, type] : by_field)
      if (a.fields_seen & (1u << field)) a.type = type;
  }
}

void read_node(Reader r, NodeP &n) {
  while (r.next()) {
    switch (r.field()) {
      case 1: n.inputs.push_back(r.bytes()); break;
      case 2: n.outputs.push_back(r.bytes()); break;
      case 3: n.name = r.bytes(); break;
      case 4: n.op_type = r.bytes(); break;
      case 5: n.attrs.emplace_back(); read_attribute(r.sub("AttributeProto"), n.attrs.back()); break;
      case 7: n.domain = r.bytes(); break;
      default: r.skip();
    }
  }
}

void read_graph(Reader r, GraphP &g) {
  while (r.next()) {
    switch (r.field()) {
      case 1: g.nodes.emplace_back(); read_node(r.sub("NodeProto"), g.nodes.back()); break;
      case 2: g.name = r.bytes(); break;
      case 5: g.initializers.emplace_back(); read_tensor(r.sub("TensorProto"), g.initializers.back()); break;
      case 11: g.inputs.emplace_back(); read_value_info(r.sub("ValueInfoProto"), g.inputs.back()); break;
      case 12: g.outputs.emplace_back(); read_value_info(r.sub("ValueInfoProto"), g.outputs.back()); break;
      case 13: g.value_info.emplace_back(); read_value_info(r.sub("ValueInfoProto"), g.value_info.back()); break;
      case 15: ++g.n_sparse_initializers; r.skip(); break;
      default: r.skip();
    }
  }
}

}  // namespace

ModelP parse_model(const uint8_t *data, size_t size, const std::string &what) {
  Source src{data, &what};
  Reader r(src, data, data + size, "ModelProto", 0);
  ModelP m;
  while (r.next()) {
    switch (r.field()) {
      case 1: m.ir_version = r.i64(); break;
      case 2: m.producer_name = r.bytes(); break;
      case 3: m.producer_version = r.bytes(); break;
      case 4: m.domain = r.bytes(); break;
      case 7: m.has_graph = true; read_graph(r.sub("GraphProto"), m.graph); break;
      case 8: {
        Reader o = r.sub("OperatorSetIdProto");
        OpsetP op;
        while (o.next()) {
          if (o.field() == 1) op.domain = o.bytes();
          else if (o.field() == 2) op.version = o.i64();
          else o.skip();
        }
        m.opsets.push_back(op);
        break;
      }
      case 25: {
        Reader fr = r.sub("FunctionProto");
        FunctionP fn;
        while (fr.next()) {
          if (fr.field() == 1) fn.name = fr.bytes();
          else if (fr.field() == 10) fn.domain = fr.bytes();
          else fr.skip();
        }
        m.functions.push_back(fn);
        break;
      }
      default: r.skip();
    }
  }
  return m;
}

TensorP parse_tensor(const uint8_t *data, size_t size, const std::string &what) {
  Source src{data, &what};
  TensorP t;
  read_tensor(Reader(src, data, data + size, "TensorProto", 0), t);
  return t;
}

}  // namespace ctn::onnx
