// A small, strict JSON reader and writer: what safetensors headers and
// checkpoint metadata need (objects that keep their key order, arrays,
// strings with every escape, 64-bit integers, doubles, booleans, null).
// Parsing follows RFC 8259 to the letter (no comments, no trailing commas, no
// NaN, no leading zeros, UTF-8 checked, duplicate keys refused) and every error
// names the byte offset, line and column where it went wrong.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "tensor/core/errors.h"

namespace tandem::json {

// A JSON text that does not parse. what() reads
//   "JSON: expected ',' or '}' after an object member at byte 17 (line 1, column 18)"
class ParseError : public ValueError {
 public:
  ParseError(const std::string& message, size_t offset, size_t line, size_t column);
  // Where the problem is: a byte offset into the text, and 1-based line and column (in bytes).
  size_t offset() const { return offset_; }
  size_t line() const { return line_; }
  size_t column() const { return column_; }
  // The message without the position.
  const std::string& reason() const { return reason_; }

 private:
  std::string reason_;
  size_t offset_, line_, column_;
};

class Value;
using Array = std::vector<Value>;
// Members in the order they were written or inserted; keys are unique.
using Object = std::vector<std::pair<std::string, Value>>;

enum class Type : int8_t { Null, Bool, Int, Double, String, Array, Object };
std::string_view type_name(Type type);  // "null", "boolean", "integer", "number", "string", "array", "object"

class Value {
 public:
  Value() = default;  // null
  Value(std::nullptr_t) {}
  Value(bool b) : data_(b) {}
  // Any integer type; unsigned values above INT64_MAX are refused (ValueError).
  template <typename I>
  requires(std::is_integral_v<I> && !std::is_same_v<I, bool>) Value(I i) : data_(to_int64(i)) {}
  Value(double d) : data_(d) {}
  Value(std::string s) : data_(std::move(s)) {}
  Value(std::string_view s) : data_(std::string(s)) {}
  Value(const char* s) : data_(std::string(s)) {}
  Value(Array a) : data_(std::move(a)) {}
  Value(Object o) : data_(std::move(o)) {}

  Type type() const { return static_cast<Type>(data_.index()); }
  bool is_null() const { return type() == Type::Null; }
  bool is_bool() const { return type() == Type::Bool; }
  bool is_int() const { return type() == Type::Int; }
  bool is_double() const { return type() == Type::Double; }
  bool is_number() const { return is_int() || is_double(); }
  bool is_string() const { return type() == Type::String; }
  bool is_array() const { return type() == Type::Array; }
  bool is_object() const { return type() == Type::Object; }

  // Typed access; the wrong type is a ValueError naming both ("JSON: expected
  // a string, got an array"). as_double() also takes an integer.
  bool as_bool() const;
  int64_t as_int() const;
  double as_double() const;
  const std::string& as_string() const;
  const Array& as_array() const;
  Array& as_array();
  const Object& as_object() const;
  Object& as_object();

  // Object members by key (linear search: objects here are small).
  const Value* find(std::string_view key) const;
  Value* find(std::string_view key);
  bool contains(std::string_view key) const { return find(key) != nullptr; }
  const Value& at(std::string_view key) const;  // KeyError when absent
  // Sets a member, keeping the place of an existing key (this must be an object).
  void set(std::string key, Value value);
  // Appends to an array.
  void push_back(Value value);
  size_t size() const;  // members of an object, elements of an array

  bool operator==(const Value& other) const = default;

 private:
  template <typename I>
  static int64_t to_int64(I i) {
    if constexpr (std::is_unsigned_v<I> && sizeof(I) >= sizeof(int64_t)) {
      TANDEM_CHECK(i <= static_cast<uint64_t>(INT64_MAX), ValueError, "JSON: integer ", i,
                   " does not fit in a signed 64-bit integer");
    }
    return static_cast<int64_t>(i);
  }
  [[noreturn]] void type_error(Type expected) const;

  std::variant<std::nullptr_t, bool, int64_t, double, std::string, Array, Object> data_;
};

struct ParseOptions {
  // Nesting deeper than this is refused (a hostile file must not overflow the stack).
  int max_depth = 128;
};

// Parses one JSON value; only whitespace may follow it. Throws ParseError.
// Numbers without fraction or exponent are integers and must fit in int64;
// the others are doubles and must be finite.
Value parse(std::string_view text, const ParseOptions& options = {});

// Writes the value as JSON text: compact (`{"a":[1,2]}`) when indent < 0,
// else one member per line indented by that many spaces. Strings are written
// as UTF-8 with only '"', '\\' and control characters escaped; doubles in the
// shortest form that reads back exactly, with ".0" kept on whole numbers so
// that they read back as doubles. NaN and infinities have no JSON form: ValueError.
std::string dump(const Value& value, int indent = -1);
// `text` as a JSON string literal, quotes included.
std::string quote(std::string_view text);

// Whether text is well-formed UTF-8 (no overlong forms, surrogates or code
// points past U+10FFFF): what the parser accepts inside strings.
bool is_valid_utf8(std::string_view text);

}  // namespace tandem::json
