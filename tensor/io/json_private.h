// Tandem's strict JSON, over nlohmann-json's ordered_json (objects keep the
// order their keys were written in). Private to the library and the tandem
// command: it is not installed and no installed header includes it, so that
// the public API names no JSON library. It includes nlohmann's forward
// declarations only; a .cpp file that builds or reads values includes
// <nlohmann/json.hpp> itself.
//
// parse() reads RFC 8259 to the letter and refuses what nlohmann alone would
// take: duplicate keys, integers outside int64, nesting deeper than 128, a
// byte order mark, and a NUL byte (nlohmann ends the text there). Every error
// names the byte offset, line and column where it went wrong.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>

#include "tensor/core/errors.h"

namespace tandem::json {

using Value = nlohmann::ordered_json;

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

struct ParseOptions {
  // Nesting deeper than this is refused (a hostile file must not make a tree that deep).
  int max_depth = 128;
};

// Parses one JSON value; only whitespace may follow it. Throws ParseError.
// Numbers without fraction or exponent are integers (stored as int64) and
// must fit in int64; the others are doubles and must be finite.
Value parse(std::string_view text, const ParseOptions& options = {});

// Writes the value as JSON text: compact (`{"a":[1,2]}`) when indent < 0,
// else one member per line indented by that many spaces. Strings are written
// as UTF-8 with only '"', '\\' and control characters escaped; doubles in the
// shortest form that reads back exactly, with ".0" kept on whole numbers so
// that they read back as doubles. What parse() would refuse is a ValueError:
// NaN and infinities (nlohmann would write null), unsigned integers past
// INT64_MAX, strings that are not UTF-8.
std::string dump(const Value& value, int indent = -1);
// `text` as a JSON string literal, quotes included, for messages: bytes that
// are not UTF-8 are copied as they are.
std::string quote(std::string_view text);

// Whether text is well-formed UTF-8 (no overlong forms, surrogates or code
// points past U+10FFFF): what the parser accepts inside strings.
bool is_valid_utf8(std::string_view text);

// "null", "boolean", "integer", "number" (a double), "string", "array", "object".
std::string_view type_name(const Value& value);

// Typed reads that refuse the wrong type with a ValueError naming both
// ("JSON: expected an integer, got a number"), where nlohmann's get<int64_t>()
// would truncate 1.5 to 1. as_double() also takes an integer; as_array() and
// as_object() return the value itself, checked.
bool as_bool(const Value& value);
int64_t as_int(const Value& value);
double as_double(const Value& value);
const std::string& as_string(const Value& value);
const Value& as_array(const Value& value);
const Value& as_object(const Value& value);
// An object's member: a ValueError when value is not an object, a KeyError
// when the key is absent.
const Value& at(const Value& value, std::string_view key);

// Appends a member to an object without looking for its key first (every
// insert into an ordered_json object searches all its keys): for keys known
// to be new, such as the names of an OrderedDict.
void append_member(Value& object, std::string key, Value value);

}  // namespace tandem::json
