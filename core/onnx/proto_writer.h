// A minimal protobuf wire-format writer for the ONNX exporter (onnx/exporter.cpp), the mirror of
// proto.cpp's reader: each message is built into a std::string and nested as a length-delimited
// field. Only the wire types ONNX needs: varint (0), fixed32 (5) and length-delimited (2).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace ctn::onnx {

class ProtoWriter {
 public:
  void varint(uint32_t field, uint64_t v) {
    key(field, 0);
    put_varint(v);
  }
  // int64/int32 fields: negative values as the 10-byte two's complement varint.
  void int64(uint32_t field, int64_t v) { varint(field, static_cast<uint64_t>(v)); }
  void f32(uint32_t field, float v) {
    key(field, 5);
    char b[4];
    std::memcpy(b, &v, 4);  // little-endian hosts only, as the rest of chutney
    out_.append(b, 4);
  }
  void bytes(uint32_t field, std::string_view s) {
    key(field, 2);
    put_varint(s.size());
    out_.append(s.data(), s.size());
  }
  void message(uint32_t field, const ProtoWriter &m) { bytes(field, m.out_); }
  void packed_int64(uint32_t field, const std::vector<int64_t> &v) {
    ProtoWriter p;
    for (int64_t x : v) p.put_varint(static_cast<uint64_t>(x));
    bytes(field, p.out_);
  }
  const std::string &str() const { return out_; }

 private:
  void key(uint32_t field, uint32_t wire) { put_varint((static_cast<uint64_t>(field) << 3) | wire); }
  void put_varint(uint64_t v) {
    while (v >= 0x80) {
      out_ += static_cast<char>((v & 0x7f) | 0x80);
      v >>= 7;
    }
    out_ += static_cast<char>(v);
  }
  std::string out_;
};

}  // namespace ctn::onnx
