// Origin: where a tensor was made or last moved, recorded by factories and
// .to() through std::source_location so that device errors can point at the
// line to fix. Results of ops inherit the origin of the input they follow.
#pragma once

#include <cstdint>
#include <source_location>
#include <string>

namespace tandem {

struct Origin {
  enum class Kind : int8_t { Unknown, Created, Moved, Computed };
  Kind kind = Kind::Unknown;
  const char* op = "";       // the factory, ".to()" or the op that computed it
  const char* root_op = "";  // for Computed: the factory or .to() upstream
  Kind root_kind = Kind::Unknown;
  const char* file = "";
  uint32_t line = 0;

  static Origin created(const char* op, const std::source_location& loc) {
    return {Kind::Created, op, op, Kind::Created, loc.file_name(), loc.line()};
  }
  static Origin moved(const char* op, const std::source_location& loc) {
    return {Kind::Moved, op, op, Kind::Moved, loc.file_name(), loc.line()};
  }
  // The result of `op` whose device came from a tensor of origin `from`.
  static Origin computed(const char* op, const Origin& from) {
    Origin o = from;
    if (from.kind != Kind::Computed) {
      o.root_op = from.op;
      o.root_kind = from.kind;
    }
    o.kind = Kind::Computed;
    o.op = op;
    return o;
  }
  // "created by tandem::zeros at train.cpp:12", "moved by .to() at ...",
  // "computed by add from a tensor created by tandem::randn at ...".
  std::string describe() const;
};

}  // namespace tandem
