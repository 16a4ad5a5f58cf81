#include "io/json.h"

#include <cstdio>
#include <unordered_set>

namespace ctn::io {

Json::Json() = default;
Json::~Json() = default;
Json::Json(const Json &) = default;
Json::Json(Json &&) noexcept = default;
Json &Json::operator=(const Json &) = default;
Json &Json::operator=(Json &&) noexcept = default;


namespace {

constexpr int kMaxDepth = 64;

struct Parser {
  std::string_view s;
  size_t i = 0;
  std::string err;

  bool fail(const char *what) {
    if (err.empty()) err = std::string(what) + " at byte " + std::to_string(i);
    return false;
  }
  void ws() {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) ++i;
  }
  bool lit(std::string_view w) {
    if (s.substr(i, w.size()) != w) return fail("invalid literal");
    i += w.size();
    return true;
  }
  static int hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
  bool hex4(uint32_t *out) {
    if (s.size() - i < 4) return fail("truncated \\u escape");
    uint32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      int h = hex(s[i + static_cast<size_t>(k)]);
      if (h < 0) return fail("bad hex digit in \\u escape");
      v = v * 16 + static_cast<uint32_t>(h);
    }
    i += 4;
    *out = v;
    return true;
  }
  static void put_utf8(std::string &o, uint32_t cp) {
    if (cp < 0x80) {
      o += static_cast<char>(cp);
    } else if (cp < 0x800) {
      o += static_cast<char>(0xc0 | (cp >> 6));
      o += static_cast<char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      o += static_cast<char>(0xe0 | (cp >> 12));
      o += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      o += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
      o += static_cast<char>(0xf0 | (cp >> 18));
      o += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
      o += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      o += static_cast<char>(0x80 | (cp & 0x3f));
    }
  }
  bool string(std::string *out) {
    if (i >= s.size() || s[i] != '"') return fail("expected a string");
    ++i;
    std::string o;
    size_t run = i;  // start of the current run of unescaped bytes
    for (;;) {
      if (i >= s.size()) return fail("unterminated string");
      char c = s[i];
      if (c == '"') break;
      if (static_cast<unsigned char>(c) < 0x20) return fail("control character in string");
      if (c != '\\') {
        ++i;
        continue;
      }
      o.append(s.substr(run, i - run));
      if (++i >= s.size()) return fail("unterminated escape");
      char e = s[i++];
      switch (e) {
        case '"': o += '"'; break;
        case '\\': o += '\\'; break;
        case '/': o += '/'; break;
        case 'b': o += '\b'; break;
        case 'f': o += '\f'; break;
        case 'n': o += '\n'; break;
        case 'r': o += '\r'; break;
        case 't': o += '\t'; break;
        case 'u': {
          uint32_t cp = 0;
          if (!hex4(&cp)) return false;
          if (cp >= 0xdc00 && cp <= 0xdfff) return fail("lone low surrogate");
          if (cp >= 0xd800 && cp <= 0xdbff) {
            uint32_t lo = 0;
            if (s.substr(i, 2) != "\\u") return fail("high surrogate without its pair");
            i += 2;
            if (!hex4(&lo)) return false;
            if (lo < 0xdc00 || lo > 0xdfff) return fail("bad surrogate pair");
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
          }
          put_utf8(o, cp);
          break;
        }
        default: return fail("unknown escape");
      }
      run = i;
    }
    o.append(s.substr(run, i - run));
    ++i;  // closing quote
    if (!utf8_valid(o)) return fail("invalid UTF-8 in string");
    *out = std::move(o);
    return true;
  }
  bool number(Json *out) {
    size_t b = i;
    if (i < s.size() && s[i] == '-') ++i;
    if (i >= s.size()) return fail("truncated number");
    if (s[i] == '0') {
      ++i;
    } else if (s[i] >= '1' && s[i] <= '9') {
      while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
    } else {
      return fail("invalid number");
    }
    if (i < s.size() && s[i] == '.') {
      ++i;
      size_t d = i;
      while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
      if (i == d) return fail("digits expected after '.'");
    }
    if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
      ++i;
      if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
      size_t d = i;
      while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
      if (i == d) return fail("digits expected in exponent");
    }
    out->kind = Json::Number;
    out->text.assign(s.substr(b, i - b));
    return true;
  }
  bool value(Json *out, int depth) {
    if (depth > kMaxDepth) return fail("nesting too deep");
    ws();
    if (i >= s.size()) return fail("unexpected end of input");
    char c = s[i];
    if (c == '{') {
      ++i;
      out->kind = Json::Object;
      ws();
      if (i < s.size() && s[i] == '}') {
        ++i;
        return true;
      }
      std::unordered_set<std::string> seen;  // a hash set keeps hostile headers linear
      for (;;) {
        ws();
        std::string k;
        if (!string(&k)) return false;
        if (!seen.insert(k).second) return fail(("duplicate key \"" + k + "\"").c_str());
        ws();
        if (i >= s.size() || s[i] != ':') return fail("expected ':'");
        ++i;
        Json v;
        if (!value(&v, depth + 1)) return false;
        out->members.emplace_back(std::move(k), std::move(v));
        ws();
        if (i < s.size() && s[i] == ',') {
          ++i;
          continue;
        }
        if (i < s.size() && s[i] == '}') {
          ++i;
          return true;
        }
        return fail("expected ',' or '}'");
      }
    }
    if (c == '[') {
      ++i;
      out->kind = Json::Array;
      ws();
      if (i < s.size() && s[i] == ']') {
        ++i;
        return true;
      }
      for (;;) {
        Json v;
        if (!value(&v, depth + 1)) return false;
        out->items.push_back(std::move(v));
        ws();
        if (i < s.size() && s[i] == ',') {
          ++i;
          continue;
        }
        if (i < s.size() && s[i] == ']') {
          ++i;
          return true;
        }
        return fail("expected ',' or ']'");
      }
    }
    if (c == '"') {
      out->kind = Json::String;
      return string(&out->text);
    }
    if (c == 't') {
      out->kind = Json::Bool;
      out->boolean = true;
      return lit("true");
    }
    if (c == 'f') {
      out->kind = Json::Bool;
      return lit("false");
    }
    if (c == 'n') return lit("null");
    return number(out);
  }
};

}  // namespace

const Json *Json::find(std::string_view key) const {
  // Linear: headers hold at most a few thousand keys, and lookup by name goes through an index
  // built by the caller where it matters.
  for (const auto &m : members)
    if (m.first == key) return &m.second;
  return nullptr;
}

bool Json::as_index(uint64_t *out) const {
  if (kind != Number || text.empty() || text.size() > 19) return false;
  uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (v > static_cast<uint64_t>(INT64_MAX)) return false;
  *out = v;
  return true;
}

bool json_parse(std::string_view text, Json *out, std::string *error) {
  Parser p{text, 0, {}};
  Json v;
  if (!p.value(&v, 0)) {
    *error = p.err;
    return false;
  }
  p.ws();
  if (p.i != text.size()) {
    p.fail("unexpected data after the JSON value");
    *error = p.err;
    return false;
  }
  *out = std::move(v);
  return true;
}

void json_quote(std::string &out, std::string_view s) {
  out += '"';
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  out += '"';
}

void json_write(std::string &out, const Json &v) {
  switch (v.kind) {
    case Json::Null: out += "null"; break;
    case Json::Bool: out += v.boolean ? "true" : "false"; break;
    case Json::Number: out += v.text; break;
    case Json::String: json_quote(out, v.text); break;
    case Json::Array:
      out += '[';
      for (size_t k = 0; k < v.items.size(); ++k) {
        if (k) out += ',';
        json_write(out, v.items[k]);
      }
      out += ']';
      break;
    case Json::Object:
      out += '{';
      for (size_t k = 0; k < v.members.size(); ++k) {
        if (k) out += ',';
        json_quote(out, v.members[k].first);
        out += ':';
        json_write(out, v.members[k].second);
      }
      out += '}';
      break;
  }
}

bool utf8_valid(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    size_t n;
    uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      n = 1;
      cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      n = 2;
      cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      n = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (s.size() - i <= n) return false;
    for (size_t k = 1; k <= n; ++k) {
      auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3f);
    }
    // Overlong forms, surrogates and values past U+10FFFF are invalid UTF-8.
    if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) || cp > 0x10ffff ||
        (cp >= 0xd800 && cp <= 0xdfff))
      return false;
    i += n + 1;
  }
  return true;
}

}  // namespace ctn::io
