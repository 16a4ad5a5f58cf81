// A small strict JSON (RFC 8259) reader and string writer for safetensors headers. Bounded:
// nesting depth is limited and every string is validated as UTF-8; numbers keep their text so
// integers up to 2^63-1 round-trip exactly.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ctn::io {

struct Json {
  enum Kind { Null, Bool, Number, String, Array, Object };
  Kind kind = Null;
  bool boolean = false;
  std::string text;  // String: the decoded value; Number: the literal as written
  std::vector<Json> items;
  std::vector<std::pair<std::string, Json>> members;  // in document order, keys unique

  // Out of line (json.cpp), where Json is complete: clang with libstdc++ refuses to instantiate
  // the members' destructor inside the class.
  Json();
  ~Json();
  Json(const Json &);
  Json(Json &&) noexcept;
  Json &operator=(const Json &);
  Json &operator=(Json &&) noexcept;

  const Json *find(std::string_view key) const;
  // A non-negative integer literal (no sign, fraction or exponent) that fits in int64.
  bool as_index(uint64_t *out) const;
};

// Parses a complete document (surrounding whitespace allowed). On failure returns false and sets
// *error to a message with the byte offset. Duplicate keys in an object are an error.
bool json_parse(std::string_view text, Json *out, std::string *error);

// Appends `s` as a JSON string literal (quotes, escapes for '"', '\\' and control characters).
void json_quote(std::string &out, std::string_view s);

// Compact serialisation.
void json_write(std::string &out, const Json &v);

bool utf8_valid(std::string_view s);

}  // namespace ctn::io
