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
  // What the tensor is to the user, when it is more than a value: "parameter
  // 'fc1.weight'" for the parameters and buffers of a module (nn::Module sets
  // it). Interned (intern_label), so that copying an Origin stays cheap.
  const char* label = nullptr;
  const char* root_label = nullptr;  // for Computed: the label of the tensor upstream

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
      o.root_label = from.label;
    }
    o.kind = Kind::Computed;
    o.op = op;
    o.label = nullptr;  // a result is not the parameter it came from
    return o;
  }
  // "created by tandem::zeros at train.cpp:12", "moved by .to() at ...",
  // "computed by add from a tensor created by tandem::randn at ...".
  // With labels: "parameter 'fc1.weight', moved by Module::to() at ...",
  // "computed by mm from parameter 'fc1.weight', moved by ...".
  std::string describe() const;
};

// A stable copy of `text`, kept for the life of the program: labels are few
// (one per parameter or buffer name) and Origins point at them.
const char* intern_label(const std::string& text);

}  // namespace tandem
