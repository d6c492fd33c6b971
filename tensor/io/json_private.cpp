// Tandem's strict JSON (tensor/io/json_private.h): nlohmann-json's lexer and
// parser feed a SAX handler of ours that builds the ordered_json tree and
// refuses what the format allows us to refuse; nlohmann's errors are put in
// Tandem's words, at the byte where the offending token starts.
#include "tensor/io/json_private.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <unordered_set>
#include <vector>

namespace tandem::json {

ParseError::ParseError(const std::string& message, size_t offset, size_t line, size_t column)
    : ValueError(detail::str_cat("JSON: ", message, " at byte ", offset, " (line ", line, ", column ", column, ")")),
      reason_(message),
      offset_(offset),
      line_(line),
      column_(column) {}

namespace {

using nlohmann::detail::value_t;

const char* article(std::string_view type) {
  return type == "integer" || type == "array" || type == "object" ? "an " : "a ";
}

[[noreturn]] void type_error(std::string_view expected, const Value& got) {
  throw ValueError(detail::str_cat("JSON: expected ", article(expected), expected, ", got ", article(type_name(got)),
                                   type_name(got)));
}

std::string hex_byte(unsigned char c) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02x", c);
  return buf;
}

// The length of the well-formed UTF-8 sequence at text[pos] (a byte >= 0x80),
// or 0 with `why` set and `bad_at` at the offending byte when it is not one.
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

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// A byte iterator that records how far nlohmann's lexer has read: the SAX
// callbacks get no position, and the messages need one.
struct TrackedIterator {
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  const char* at;
  const char** furthest;

  reference operator*() const { return *at; }
  TrackedIterator& operator++() {
    *furthest = ++at;
    return *this;
  }
  TrackedIterator operator++(int) {
    TrackedIterator before = *this;
    ++*this;
    return before;
  }
  bool operator==(const TrackedIterator& other) const { return at == other.at; }
};

// Builds the tree from nlohmann's SAX events (the interface of
// nlohmann::json_sax) and throws ParseError for every refusal.
class StrictBuilder {
 public:
  using number_integer_t = Value::number_integer_t;
  using number_unsigned_t = Value::number_unsigned_t;
  using number_float_t = Value::number_float_t;
  using string_t = Value::string_t;
  using binary_t = Value::binary_t;

  StrictBuilder(std::string_view text, const ParseOptions& options)
      : text_(text), options_(options), furthest_(text.data()) {}

  TrackedIterator begin() { return {text_.data(), &furthest_}; }
  TrackedIterator end() { return {text_.data() + text_.size(), &furthest_}; }
  // Bytes the lexer has taken from the text so far.
  size_t consumed() const { return static_cast<size_t>(furthest_ - text_.data()); }
  Value take_root() { return std::move(root_); }

  // ---- the SAX interface
  bool null() { return put(nullptr); }
  bool boolean(bool b) { return put(b); }
  bool number_integer(number_integer_t i) { return put(i); }
  bool number_unsigned(number_unsigned_t u) {
    if (u > static_cast<number_unsigned_t>(std::numeric_limits<int64_t>::max())) refuse_integer(std::to_string(u));
    // Every integer is stored signed, whatever its sign: one type to read.
    return put(static_cast<number_integer_t>(u));
  }
  bool number_float(number_float_t d, const string_t& literal) {
    // nlohmann reads an integer past uint64 as a double: refuse it as the
    // integer it was written as.
    if (literal.find_first_not_of("-0123456789") == std::string::npos) refuse_integer(literal);
    return put(d);
  }
  bool string(string_t& s) { return put(std::move(s)); }
  bool binary(binary_t&) { return false; }  // JSON text has no binary values: never called
  bool start_object(size_t) {
    open(Value::object());
    keys_.emplace_back();
    return true;
  }
  bool key(string_t& k) {
    if (!keys_.back().insert(k).second) fail_at(string_start(consumed() - 1), "duplicate key ", quote(k));
    key_ = std::move(k);
    return true;
  }
  bool end_object() {
    keys_.pop_back();
    open_.pop_back();
    return true;
  }
  bool start_array(size_t) {
    open(Value::array());
    return true;
  }
  bool end_array() {
    open_.pop_back();
    return true;
  }
  bool parse_error(size_t position, const std::string& lexed, const nlohmann::detail::exception& e);

  // After a successful parse: nlohmann takes a NUL byte for the end of the
  // text, and one can only be after the value (inside a string it is refused).
  void check_no_nul() {
    if (size_t nul = text_.find('\0'); nul != std::string_view::npos) {
      fail_at(nul, "unexpected byte 0x00 after the JSON value");
    }
  }

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

 private:
  template <typename T>
  bool put(T&& v) {
    if (open_.empty()) {
      root_ = std::forward<T>(v);
    } else if (open_.back()->is_array()) {
      open_.back()->get_ref<Value::array_t&>().emplace_back(std::forward<T>(v));
    } else {
      // keys_ has refused duplicates; ordered_json's own insert would search
      // the keys again (quadratic over a header of many tensors).
      append_member(*open_.back(), std::move(key_), Value(std::forward<T>(v)));
    }
    return true;
  }
  void open(Value container) {
    if (static_cast<int>(open_.size()) >= options_.max_depth) {
      fail_at(consumed() - 1, "nesting deeper than ", options_.max_depth, " levels");
    }
    put(std::move(container));
    // Pointers into the parent stay valid: nothing is added to a container
    // while a child of it is open.
    Value* child = &root_;
    if (!open_.empty()) {
      Value* parent = open_.back();
      child = parent->is_array() ? &parent->get_ref<Value::array_t&>().back()
                                 : &parent->get_ref<Value::object_t&>().back().second;
    }
    open_.push_back(child);
  }
  [[noreturn]] void refuse_integer(const std::string& literal) {
    fail_at(number_start(number_end()), "integer ", literal, " does not fit in a signed 64-bit integer");
  }

  // ---- where tokens start, from where the lexer stopped
  // For a number in a value's place (what the number callbacks see): the
  // lexer reads one byte past a number and puts it back, and that byte is
  // never a digit (it can be only after a leading zero, which is refused
  // before any callback).
  size_t number_end() const {
    size_t n = consumed();
    return n > 0 && is_digit(text_[n - 1]) ? n : n - 1;
  }
  // The run of number bytes before `end`, from its first sign or digit (an
  // exponent's 'e' may follow a literal such as true): the number that ends
  // there when it is in a value's place.
  size_t number_start(size_t end) const {
    size_t start = end;
    while (start > 0 && std::string_view("0123456789+-.eE").find(text_[start - 1]) != std::string_view::npos) --start;
    while (start < end && text_[start] != '-' && !is_digit(text_[start])) ++start;
    return start;
  }
  // The opening quote of the string whose bytes run up to before `pos`: the
  // nearest quote before it that no backslash escapes.
  size_t string_start(size_t pos) const {
    for (size_t i = pos; i-- > 0;) {
      if (text_[i] != '"') continue;
      size_t backslashes = 0;
      while (backslashes < i && text_[i - 1 - backslashes] == '\\') ++backslashes;
      if (backslashes % 2 == 0) return i;
    }
    return 0;
  }
  // "end of input", "'x'", or "byte 0x07" for what sits at pos.
  std::string describe(size_t pos) const {
    if (pos >= text_.size()) return "end of input";
    unsigned char c = static_cast<unsigned char>(text_[pos]);
    if (c >= 0x20 && c < 0x7f) return detail::str_cat("'", static_cast<char>(c), "'");
    return "byte " + hex_byte(c);
  }
  // The start of the literal (true, false, null) cut short at pos, if one is.
  std::optional<std::pair<size_t, std::string_view>> literal_before(size_t pos) const {
    for (std::string_view word : {"true", "false", "null"}) {
      for (size_t k = word.size() - 1; k >= 1; --k) {
        if (pos >= k && text_.substr(pos - k, k) == word.substr(0, k)) return std::pair{pos - k, word};
      }
    }
    return std::nullopt;
  }
  // The start of the \u escape holding the high surrogate that wants a low
  // one, or of the lone low surrogate, in the string opened at `open` and
  // refused at `bad`.
  size_t surrogate_escape(size_t open, size_t bad, bool high) const {
    size_t last = open, previous = open;
    for (size_t i = open + 1; i < bad;) {
      if (text_[i] != '\\') {
        ++i;
      } else if (i + 1 < text_.size() && text_[i + 1] == 'u') {
        previous = last;
        last = i;
        i += 6;
      } else {
        i += 2;
      }
    }
    // A high surrogate followed by a whole \u escape that is not a low one
    // (refused at its last digit): the high one is the escape before.
    return high && bad == last + 5 ? previous : last;
  }
  // A number starting at `start` right after a '0': only a leading zero
  // ends a number there, and the number is the one at fault.
  void refuse_leading_zero(size_t start) const {
    if (start > 0 && text_[start - 1] == '0' && is_digit(text_[start])) {
      fail_at(start >= 2 && text_[start - 2] == '-' ? start - 2 : start - 1, "invalid number: leading zero");
    }
  }
  // Where the token that nlohmann names ("'}'", "number literal", ...) starts;
  // `position` and `lexed` are the lexer's (see parse_error).
  size_t token_start(std::string_view token, size_t position, const std::string& lexed) const {
    size_t n = consumed();
    if (token == "end of input") {
      // The end, or the first NUL byte, which nlohmann reads as the end (a
      // NUL inside a string is refused before: strings cannot hold one).
      size_t nul = text_.find('\0');
      return nul == std::string_view::npos ? text_.size() : nul;
    }
    if (token == "string literal") return string_start(n - 1);
    // The lexer read one byte past the number and put it back: its position
    // is the number's end, and the bytes it kept are the number's.
    if (token == "number literal") return position - lexed.size();
    if (token == "true literal" || token == "null literal") return n - 4;
    if (token == "false literal") return n - 5;
    return n - 1;  // one structural byte
  }
  // The message for `got`, something other than what the context wants.
  std::string unexpected(std::string_view context, bool after_value, size_t at) const {
    bool end = at >= text_.size();
    std::string got = describe(at);
    if (context == "object key") return "expected a string key, got " + got;
    if (context == "object separator") {
      return detail::str_cat("expected ':' after the key ", quote(key_), ", got ", got);
    }
    if (context == "object") {
      return end ? "unexpected end of input: expected ',' or '}' in an object"
                 : "expected ',' or '}' after an object member, got " + got;
    }
    if (context == "array") {
      return end ? "unexpected end of input: expected ',' or ']' in an array"
                 : "expected ',' or ']' after an array element, got " + got;
    }
    if (after_value) return "unexpected " + got + " after the JSON value";
    return "unexpected " + got + ": expected a value";
  }

  std::string_view text_;
  ParseOptions options_;
  const char* furthest_;
  Value root_;
  std::vector<Value*> open_;                           // the open containers, innermost last
  std::vector<std::unordered_set<std::string>> keys_;  // the keys of each open object
  std::string key_;                                    // the key of the member being read
};

// nlohmann's message, e.g. "[json.exception.parse_error.101] parse error at
// line 1, column 8: syntax error while parsing object key - unexpected '}';
// expected string literal" or "... - invalid number; expected digit after
// '-'; last read: '-'", names the context, then either the unexpected token
// or the lexer's complaint about the token it was reading. The lexer stops on
// the byte it could not take (`position` counts one more read when that was
// the end of the text).
//
// `lexed` is the lexer's copy of the bytes of the token it read last, with
// control characters written as "<U+000A>": for a number, its bytes (and
// the one it refused).
bool StrictBuilder::parse_error(size_t position, const std::string& lexed, const nlohmann::detail::exception& e) {
  const size_t n = consumed();
  if (e.id == 406) {  // a number past the range of a double
    fail_at(position - lexed.size(), "number ", lexed, " is out of the range of a double");
  }
  std::string_view what = e.what();
  std::string_view context, detail;
  if (size_t syntax = what.find("syntax error "); syntax != std::string_view::npos) {
    detail = what.substr(syntax + 13);
    if (detail.starts_with("while parsing ")) {
      size_t dash = detail.find(" - ");
      context = detail.substr(14, dash - 14);
      detail = dash == std::string_view::npos ? std::string_view() : detail.substr(dash + 3);
    } else if (detail.starts_with("- ")) {
      detail = detail.substr(2);
    }
  }
  const bool after_value = what.ends_with("; expected end of input");

  if (detail.starts_with("unexpected ")) {
    std::string_view token = detail.substr(11, detail.find("; expected") - 11);
    size_t at = token_start(token, position, lexed);
    if (token == "number literal") refuse_leading_zero(at);
    fail_at(at, unexpected(context, after_value, at));
  }

  std::string_view lexer = detail.substr(0, detail.find("; last read: "));
  const bool at_end = position > n;
  const size_t bad = at_end ? n : n - 1;
  // The token the lexer was reading, and whether the context takes one of its
  // kind (a value anything, an object key a string): if not, the token is
  // what is unexpected, not what is wrong inside it.
  const bool wants_value = context == "value" && !after_value;
  std::optional<std::pair<size_t, std::string_view>> literal;
  size_t start = bad;
  bool fits = false;
  if (lexer.starts_with("invalid string")) {
    start = string_start(bad);
    fits = wants_value || context == "object key";
  } else if (lexer.starts_with("invalid number")) {
    size_t refused = at_end ? 0 : static_cast<unsigned char>(text_[bad]) < 0x20 ? 8 : 1;  // "<U+000A>"
    start = bad - (lexed.size() - refused);
    refuse_leading_zero(start);
    fits = wants_value;
  } else if (lexer == "invalid literal" && (literal = literal_before(bad))) {
    start = literal->first;
    fits = wants_value;
  }
  if (!fits || lexer == "invalid literal") {
    if (literal && fits) fail_at(start, "invalid literal: expected '", literal->second, "'");
    fail_at(start, unexpected(context, after_value, start));
  }

  if (lexer == "invalid string: missing closing quote" ||
      (at_end && lexer == "invalid string: forbidden character after backslash")) {
    fail_at(start, "unterminated string");
  }
  if (lexer == "invalid string: forbidden character after backslash") {
    fail_at(bad - 1, "invalid escape '\\", text_[bad], "' in a string");
  }
  if (lexer == "invalid string: '\\u' must be followed by 4 hex digits") {
    if (at_end) {
      size_t digits = bad;  // where the escape's hex digits begin
      while (digits > 0 && text_[digits - 1] != 'u') --digits;
      fail_at(digits, "unexpected end of input in a \\u escape");
    }
    fail_at(bad, "invalid \\u escape: expected 4 hex digits, got ", describe(bad));
  }
  if (lexer.starts_with("invalid string: surrogate U+D800..U+DBFF")) {
    fail_at(surrogate_escape(start, bad, true), "invalid \\u escape: high surrogate not followed by a low one");
  }
  if (lexer.starts_with("invalid string: surrogate U+DC00..U+DFFF")) {
    fail_at(surrogate_escape(start, bad, false), "invalid \\u escape: lone low surrogate");
  }
  if (lexer.starts_with("invalid string: control character")) {
    fail_at(bad, "control character ", describe(bad), " in a string: write it as an escape");
  }
  if (lexer == "invalid string: ill-formed UTF-8 byte") {
    // The string's bytes before this one were taken, so its first bad
    // sequence is the one.
    for (size_t pos = start; pos < text_.size();) {
      if (static_cast<unsigned char>(text_[pos]) < 0x80) {
        ++pos;
        continue;
      }
      const char* why = "";
      size_t bad_at = pos;
      size_t length = utf8_sequence_length(text_, pos, &why, &bad_at);
      if (length == 0) {
        fail_at(bad_at, "invalid UTF-8 (byte ", hex_byte(static_cast<unsigned char>(text_[bad_at])), "): ", why);
      }
      pos += length;
    }
  }
  if (lexer == "invalid number; expected digit after '-'") fail_at(bad, "invalid number: expected a digit after '-'");
  if (lexer == "invalid number; expected digit after '.'") fail_at(bad, "invalid number: expected a digit after '.'");
  if (lexer.starts_with("invalid number; expected") && lexer.find("exponent") != std::string_view::npos) {
    fail_at(bad, "invalid number: expected a digit in the exponent");
  }
  // A complaint this file does not know (another nlohmann version): in its own words.
  fail_at(std::min(bad, text_.size()), lexer.empty() ? what : lexer);
}

void check_writable(const Value& v) {
  switch (v.type()) {
    case value_t::number_float: {
      double d = v.get<double>();
      TANDEM_CHECK(std::isfinite(d), ValueError, "JSON: cannot write ", d,
                   ": NaN and infinities have no JSON form (store them as strings)");
      return;
    }
    case value_t::number_unsigned: {
      uint64_t u = v.get<uint64_t>();
      TANDEM_CHECK(u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()), ValueError, "JSON: integer ", u,
                   " does not fit in a signed 64-bit integer");
      return;
    }
    case value_t::array:
      for (const Value& e : v) check_writable(e);
      return;
    case value_t::object:
      for (const auto& [k, e] : v.items()) {
        // nlohmann would throw its own type_error on such a key.
        TANDEM_CHECK(is_valid_utf8(k), ValueError, "JSON: cannot write the key ", quote(k), ": it is not valid UTF-8");
        check_writable(e);
      }
      return;
    case value_t::string:
      TANDEM_CHECK(is_valid_utf8(v.get_ref<const std::string&>()), ValueError, "JSON: cannot write the string ",
                   quote(v.get_ref<const std::string&>()), ": it is not valid UTF-8");
      return;
    case value_t::null:
    case value_t::boolean:
    case value_t::number_integer: return;
    case value_t::binary:
    case value_t::discarded: throw ValueError(detail::str_cat("JSON: cannot write a ", v.type_name(), " value"));
  }
}

}  // namespace

Value parse(std::string_view text, const ParseOptions& options) {
  StrictBuilder builder(text, options);
  // nlohmann skips a byte order mark, which RFC 8259 forbids a writer to add.
  if (!text.empty() && text[0] == '\xef') builder.fail_at(0, "unexpected byte 0xef: expected a value");
  bool parsed = Value::sax_parse(builder.begin(), builder.end(), &builder, nlohmann::detail::input_format_t::json,
                                 /*strict=*/true, /*ignore_comments=*/false);
  TANDEM_INTERNAL_ASSERT(parsed, "the SAX handler stopped the parse without an error");
  builder.check_no_nul();
  return builder.take_root();
}

std::string dump(const Value& value, int indent) {
  check_writable(value);
  return value.dump(indent);
}

std::string quote(std::string_view text) {
  std::string out = "\"";
  for (char ch : text) {
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
  return out + "\"";
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

std::string_view type_name(const Value& value) {
  switch (value.type()) {
    case value_t::null: return "null";
    case value_t::boolean: return "boolean";
    case value_t::number_integer:
    case value_t::number_unsigned: return "integer";
    case value_t::number_float: return "number";
    case value_t::string: return "string";
    case value_t::array: return "array";
    case value_t::object: return "object";
    case value_t::binary: return "binary";
    case value_t::discarded: return "discarded";
  }
  return "?";
}

bool as_bool(const Value& value) {
  if (!value.is_boolean()) type_error("boolean", value);
  return value.get<bool>();
}

int64_t as_int(const Value& value) {
  if (!value.is_number_integer()) type_error("integer", value);
  if (value.is_number_unsigned()) {
    uint64_t u = value.get<uint64_t>();
    TANDEM_CHECK(u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()), ValueError, "JSON: integer ", u,
                 " does not fit in a signed 64-bit integer");
  }
  return value.get<int64_t>();
}

double as_double(const Value& value) {
  if (!value.is_number()) type_error("number", value);
  return value.get<double>();
}

const std::string& as_string(const Value& value) {
  if (!value.is_string()) type_error("string", value);
  return value.get_ref<const std::string&>();
}

const Value& as_array(const Value& value) {
  if (!value.is_array()) type_error("array", value);
  return value;
}

const Value& as_object(const Value& value) {
  if (!value.is_object()) type_error("object", value);
  return value;
}

const Value& at(const Value& value, std::string_view key) {
  auto it = as_object(value).find(std::string(key));
  TANDEM_CHECK(it != value.end(), KeyError, "JSON: the object has no member ", quote(key));
  return *it;
}

void append_member(Value& object, std::string key, Value value) {
  // ordered_map is a std::vector of the members underneath.
  object.get_ref<Value::object_t&>().emplace_back(std::move(key), std::move(value));
}

}  // namespace tandem::json
