// The JSON reader (a recursive-descent parser over bytes that checks UTF-8
// as it goes) and writer of tensor/io/json.h.
#include "tensor/io/json.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <system_error>
#include <unordered_set>

namespace tandem::json {

ParseError::ParseError(const std::string& message, size_t offset, size_t line, size_t column)
    : ValueError(detail::str_cat("JSON: ", message, " at byte ", offset, " (line ", line, ", column ", column, ")")),
      reason_(message),
      offset_(offset),
      line_(line),
      column_(column) {}

std::string_view type_name(Type type) {
  switch (type) {
    case Type::Null: return "null";
    case Type::Bool: return "boolean";
    case Type::Int: return "integer";
    case Type::Double: return "number";
    case Type::String: return "string";
    case Type::Array: return "array";
    case Type::Object: return "object";
  }
  return "?";
}

// ---- Value

namespace {
const char* article(Type type) {
  return type == Type::Int || type == Type::Array || type == Type::Object ? "an " : "a ";
}
}  // namespace

void Value::type_error(Type expected) const {
  throw ValueError(detail::str_cat("JSON: expected ", article(expected), type_name(expected), ", got ", article(type()),
                                   type_name(type())));
}

bool Value::as_bool() const {
  if (!is_bool()) type_error(Type::Bool);
  return std::get<bool>(data_);
}
int64_t Value::as_int() const {
  if (!is_int()) type_error(Type::Int);
  return std::get<int64_t>(data_);
}
double Value::as_double() const {
  if (is_int()) return static_cast<double>(std::get<int64_t>(data_));
  if (!is_double()) type_error(Type::Double);
  return std::get<double>(data_);
}
const std::string& Value::as_string() const {
  if (!is_string()) type_error(Type::String);
  return std::get<std::string>(data_);
}
const Array& Value::as_array() const {
  if (!is_array()) type_error(Type::Array);
  return std::get<Array>(data_);
}
Array& Value::as_array() {
  if (!is_array()) type_error(Type::Array);
  return std::get<Array>(data_);
}
const Object& Value::as_object() const {
  if (!is_object()) type_error(Type::Object);
  return std::get<Object>(data_);
}
Object& Value::as_object() {
  if (!is_object()) type_error(Type::Object);
  return std::get<Object>(data_);
}

const Value* Value::find(std::string_view key) const {
  for (const auto& [k, v] : as_object()) {
    if (k == key) return &v;
  }
  return nullptr;
}
Value* Value::find(std::string_view key) {
  for (auto& [k, v] : as_object()) {
    if (k == key) return &v;
  }
  return nullptr;
}
const Value& Value::at(std::string_view key) const {
  const Value* v = find(key);
  TANDEM_CHECK(v != nullptr, KeyError, "JSON: the object has no member ", quote(key));
  return *v;
}
void Value::set(std::string key, Value value) {
  if (Value* v = find(key)) {
    *v = std::move(value);
  } else {
    as_object().emplace_back(std::move(key), std::move(value));
  }
}
void Value::push_back(Value value) { as_array().push_back(std::move(value)); }
size_t Value::size() const {
  if (is_object()) return std::get<Object>(data_).size();
  return as_array().size();
}

// ---- parsing

namespace {

// The length of the well-formed UTF-8 sequence at text[pos] (a byte >= 0x80),
// or 0 with `why` set when it is not one.
size_t utf8_sequence_length(std::string_view text, size_t pos, const char** why, size_t* bad_at) {
  auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  unsigned char b0 = byte(pos);
  size_t length;
  uint32_t cp;
  *bad_at = pos;
  if (b0 >= 0xc2 && b0 <= 0xdf) {
    length = 2;
    cp = b0 & 0x1f;
  } else if (b0 >= 0xe0 && b0 <= 0xef) {
    length = 3;
    cp = b0 & 0x0f;
  } else if (b0 >= 0xf0 && b0 <= 0xf4) {
    length = 4;
    cp = b0 & 0x07;
  } else {
    *why = "this byte cannot start a character";
    return 0;
  }
  if (text.size() - pos < length) {
    *why = "a character is cut off by the end";
    return 0;
  }
  for (size_t i = 1; i < length; ++i) {
    unsigned char b = byte(pos + i);
    if ((b & 0xc0) != 0x80) {
      *why = "expected a continuation byte";
      *bad_at = pos + i;
      return 0;
    }
    cp = (cp << 6) | (b & 0x3f);
  }
  if ((length == 3 && cp < 0x800) || (length == 4 && cp < 0x10000)) {
    *why = "overlong encoding";
  } else if (cp >= 0xd800 && cp <= 0xdfff) {
    *why = "encoded surrogate";
  } else if (cp > 0x10ffff) {
    *why = "code point past U+10FFFF";
  } else {
    return length;
  }
  return 0;
}

class Parser {
 public:
  Parser(std::string_view text, const ParseOptions& options) : text_(text), options_(options) {}

  Value parse_document() {
    skip_whitespace();
    Value v = parse_value(0);
    skip_whitespace();
    if (pos_ != text_.size()) fail("unexpected ", describe_here(), " after the JSON value");
    return v;
  }

 private:
  template <typename... Args>
  [[noreturn]] void fail_at(size_t at, const Args&... parts) const {
    size_t line = 1, column = 1;
    for (size_t i = 0; i < at && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    throw ParseError(detail::str_cat(parts...), at, line, column);
  }
  template <typename... Args>
  [[noreturn]] void fail(const Args&... parts) const {
    fail_at(pos_, parts...);
  }

  // "end of input", "'x'", or "byte 0x07" for what sits at pos_.
  std::string describe_here() const {
    if (pos_ >= text_.size()) return "end of input";
    unsigned char c = static_cast<unsigned char>(text_[pos_]);
    if (c >= 0x20 && c < 0x7f) return detail::str_cat("'", static_cast<char>(c), "'");
    char buf[8];
    std::snprintf(buf, sizeof buf, "0x%02x", c);
    return detail::str_cat("byte ", buf);
  }

  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return text_[pos_]; }

  void skip_whitespace() {
    while (!at_end()) {
      char c = peek();
      if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
      ++pos_;
    }
  }

  void expect_literal(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) fail("invalid literal: expected '", word, "'");
    pos_ += word.size();
  }

  Value parse_value(int depth) {
    if (at_end()) fail("unexpected end of input: expected a value");
    switch (peek()) {
      case '{': return parse_object(depth + 1);
      case '[': return parse_array(depth + 1);
      case '"': return Value(parse_string());
      case 't': expect_literal("true"); return Value(true);
      case 'f': expect_literal("false"); return Value(false);
      case 'n': expect_literal("null"); return Value(nullptr);
      default:
        if (peek() == '-' || (peek() >= '0' && peek() <= '9')) return parse_number();
        fail("unexpected ", describe_here(), ": expected a value");
    }
  }

  void check_depth(int depth) {
    if (depth > options_.max_depth) fail("nesting deeper than ", options_.max_depth, " levels");
  }

  Value parse_object(int depth) {
    check_depth(depth);
    ++pos_;  // '{'
    Object members;
    std::unordered_set<std::string> keys;
    skip_whitespace();
    if (!at_end() && peek() == '}') {
      ++pos_;
      return Value(std::move(members));
    }
    while (true) {
      skip_whitespace();
      if (at_end() || peek() != '"') fail("expected a string key, got ", describe_here());
      size_t key_at = pos_;
      std::string key = parse_string();
      if (!keys.insert(key).second) fail_at(key_at, "duplicate key ", quote(key));
      skip_whitespace();
      if (at_end() || peek() != ':') fail("expected ':' after the key ", quote(key), ", got ", describe_here());
      ++pos_;
      skip_whitespace();
      members.emplace_back(std::move(key), parse_value(depth));
      skip_whitespace();
      if (at_end()) fail("unexpected end of input: expected ',' or '}' in an object");
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == '}') {
        ++pos_;
        return Value(std::move(members));
      }
      fail("expected ',' or '}' after an object member, got ", describe_here());
    }
  }

  Value parse_array(int depth) {
    check_depth(depth);
    ++pos_;  // '['
    Array elements;
    skip_whitespace();
    if (!at_end() && peek() == ']') {
      ++pos_;
      return Value(std::move(elements));
    }
    while (true) {
      skip_whitespace();
      elements.push_back(parse_value(depth));
      skip_whitespace();
      if (at_end()) fail("unexpected end of input: expected ',' or ']' in an array");
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == ']') {
        ++pos_;
        return Value(std::move(elements));
      }
      fail("expected ',' or ']' after an array element, got ", describe_here());
    }
  }

  static void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xc0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xe0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
      out += static_cast<char>(0xf0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    }
  }

  // Four hex digits after "\u" (pos_ at the first digit).
  uint32_t parse_hex4() {
    if (text_.size() - pos_ < 4) fail("unexpected end of input in a \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      char c = text_[pos_];
      v <<= 4;
      if (c >= '0' && c <= '9') {
        v |= static_cast<uint32_t>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        v |= static_cast<uint32_t>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        v |= static_cast<uint32_t>(c - 'A' + 10);
      } else {
        fail("invalid \\u escape: expected 4 hex digits, got ", describe_here());
      }
      ++pos_;
    }
    return v;
  }

  // One UTF-8 sequence starting at pos_ (a byte >= 0x80), checked, appended as is.
  void copy_utf8_sequence(std::string& out) {
    const char* why = "";
    size_t bad_at = pos_;
    size_t length = utf8_sequence_length(text_, pos_, &why, &bad_at);
    if (length == 0) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "0x%02x", static_cast<unsigned char>(text_[bad_at]));
      fail_at(bad_at, "invalid UTF-8 (byte ", buf, "): ", why);
    }
    out.append(text_.substr(pos_, length));
    pos_ += length;
  }

  std::string parse_string() {
    size_t open = pos_;
    ++pos_;  // '"'
    std::string out;
    while (true) {
      if (at_end()) fail_at(open, "unterminated string");
      unsigned char c = static_cast<unsigned char>(peek());
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (c < 0x20) fail("control character ", describe_here(), " in a string: write it as an escape");
      if (c >= 0x80) {
        copy_utf8_sequence(out);
        continue;
      }
      if (c != '\\') {
        // A run of plain ASCII at once.
        size_t run = pos_;
        while (run < text_.size()) {
          unsigned char r = static_cast<unsigned char>(text_[run]);
          if (r == '"' || r == '\\' || r < 0x20 || r >= 0x80) break;
          ++run;
        }
        out.append(text_.substr(pos_, run - pos_));
        pos_ = run;
        continue;
      }
      size_t escape_at = pos_;
      ++pos_;
      if (at_end()) fail_at(open, "unterminated string");
      char e = peek();
      ++pos_;
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          uint32_t cp = parse_hex4();
          if (cp >= 0xdc00 && cp <= 0xdfff) fail_at(escape_at, "invalid \\u escape: lone low surrogate");
          if (cp >= 0xd800 && cp <= 0xdbff) {
            if (text_.substr(pos_, 2) != "\\u") {
              fail_at(escape_at, "invalid \\u escape: high surrogate not followed by a low one");
            }
            pos_ += 2;
            uint32_t low = parse_hex4();
            if (low < 0xdc00 || low > 0xdfff) {
              fail_at(escape_at, "invalid \\u escape: high surrogate not followed by a low one");
            }
            cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
          }
          append_utf8(out, cp);
          break;
        }
        default: fail_at(escape_at, "invalid escape '\\", e, "' in a string");
      }
    }
  }

  Value parse_number() {
    size_t start = pos_;
    bool is_integer = true;
    if (peek() == '-') ++pos_;
    if (at_end() || !(peek() >= '0' && peek() <= '9')) fail("invalid number: expected a digit after '-'");
    if (peek() == '0') {
      ++pos_;
      if (!at_end() && peek() >= '0' && peek() <= '9') fail_at(start, "invalid number: leading zero");
    } else {
      while (!at_end() && peek() >= '0' && peek() <= '9') ++pos_;
    }
    if (!at_end() && peek() == '.') {
      is_integer = false;
      ++pos_;
      if (at_end() || !(peek() >= '0' && peek() <= '9')) fail("invalid number: expected a digit after '.'");
      while (!at_end() && peek() >= '0' && peek() <= '9') ++pos_;
    }
    if (!at_end() && (peek() == 'e' || peek() == 'E')) {
      is_integer = false;
      ++pos_;
      if (!at_end() && (peek() == '+' || peek() == '-')) ++pos_;
      if (at_end() || !(peek() >= '0' && peek() <= '9')) fail("invalid number: expected a digit in the exponent");
      while (!at_end() && peek() >= '0' && peek() <= '9') ++pos_;
    }
    const char* first = text_.data() + start;
    const char* last = text_.data() + pos_;
    if (is_integer) {
      int64_t v = 0;
      auto [ptr, ec] = std::from_chars(first, last, v);
      if (ec == std::errc::result_out_of_range) {
        fail_at(start, "integer ", std::string_view(first, static_cast<size_t>(last - first)),
                " does not fit in a signed 64-bit integer");
      }
      TANDEM_INTERNAL_ASSERT(ec == std::errc() && ptr == last, "from_chars refused a checked integer");
      return Value(v);
    }
    double d = 0;
    auto [ptr, ec] = std::from_chars(first, last, d);
    if (ec == std::errc::result_out_of_range) {
      // from_chars leaves d alone on overflow and underflow alike; strtod
      // tells them apart (an underflow rounds to zero or a denormal).
      d = std::strtod(std::string(first, last).c_str(), nullptr);
      if (std::isinf(d)) {
        fail_at(start, "number ", std::string_view(first, static_cast<size_t>(last - first)),
                " is out of the range of a double");
      }
    } else {
      TANDEM_INTERNAL_ASSERT(ec == std::errc() && ptr == last, "from_chars refused a checked number");
    }
    return Value(d);
  }

  std::string_view text_;
  ParseOptions options_;
  size_t pos_ = 0;
};

// ---- writing

void write_string(std::string& out, std::string_view s) {
  out += '"';
  for (char ch : s) {
    unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += ch;
        }
    }
  }
  out += '"';
}

void write_double(std::string& out, double d) {
  TANDEM_CHECK(std::isfinite(d), ValueError, "JSON: cannot write ", d,
               ": NaN and infinities have no JSON form (store them as strings)");
  char buf[32];
  auto [ptr, ec] = std::to_chars(buf, buf + sizeof buf, d);
  TANDEM_INTERNAL_ASSERT(ec == std::errc(), "to_chars failed on a finite double");
  std::string_view text(buf, static_cast<size_t>(ptr - buf));
  out += text;
  if (text.find_first_of(".e") == std::string_view::npos) out += ".0";
}

void write_value(std::string& out, const Value& v, int indent, int level) {
  auto newline = [&](int lvl) {
    if (indent < 0) return;
    out += '\n';
    out.append(static_cast<size_t>(indent * lvl), ' ');
  };
  switch (v.type()) {
    case Type::Null: out += "null"; return;
    case Type::Bool: out += v.as_bool() ? "true" : "false"; return;
    case Type::Int: out += std::to_string(v.as_int()); return;
    case Type::Double: write_double(out, v.as_double()); return;
    case Type::String: write_string(out, v.as_string()); return;
    case Type::Array: {
      const Array& a = v.as_array();
      out += '[';
      for (size_t i = 0; i < a.size(); ++i) {
        if (i > 0) out += ',';
        newline(level + 1);
        write_value(out, a[i], indent, level + 1);
      }
      if (!a.empty()) newline(level);
      out += ']';
      return;
    }
    case Type::Object: {
      const Object& o = v.as_object();
      out += '{';
      for (size_t i = 0; i < o.size(); ++i) {
        if (i > 0) out += ',';
        newline(level + 1);
        write_string(out, o[i].first);
        out += indent < 0 ? ":" : ": ";
        write_value(out, o[i].second, indent, level + 1);
      }
      if (!o.empty()) newline(level);
      out += '}';
      return;
    }
  }
}

}  // namespace

Value parse(std::string_view text, const ParseOptions& options) { return Parser(text, options).parse_document(); }

std::string dump(const Value& value, int indent) {
  std::string out;
  write_value(out, value, indent, 0);
  return out;
}

bool is_valid_utf8(std::string_view text) {
  for (size_t pos = 0; pos < text.size();) {
    if (static_cast<unsigned char>(text[pos]) < 0x80) {
      ++pos;
      continue;
    }
    const char* why;
    size_t bad_at;
    size_t length = utf8_sequence_length(text, pos, &why, &bad_at);
    if (length == 0) return false;
    pos += length;
  }
  return true;
}

std::string quote(std::string_view text) {
  std::string out;
  write_string(out, text);
  return out;
}

}  // namespace tandem::json
