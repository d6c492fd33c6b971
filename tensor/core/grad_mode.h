// Grad mode: a per-thread switch that says whether ops record the autograd
// graph. NoGradGuard turns it off for a scope (evaluation, optimizer steps),
// EnableGradGuard turns it back on inside one, AutoGradMode sets either.
#pragma once

namespace tandem {

struct GradMode {
  static bool is_enabled();
  static void set_enabled(bool enabled);
};

// Sets grad mode for its scope and restores the previous mode on exit.
class AutoGradMode {
 public:
  explicit AutoGradMode(bool enabled) : prev_(GradMode::is_enabled()) { GradMode::set_enabled(enabled); }
  ~AutoGradMode() { GradMode::set_enabled(prev_); }
  AutoGradMode(const AutoGradMode&) = delete;
  AutoGradMode& operator=(const AutoGradMode&) = delete;

 private:
  bool prev_;
};

// As torch::NoGradGuard: nothing is recorded and nothing is saved for
// backward in its scope, so evaluation keeps no activations alive.
class NoGradGuard : public AutoGradMode {
 public:
  NoGradGuard() : AutoGradMode(false) {}
};

// As torch.enable_grad(): records again inside a NoGradGuard's scope.
class EnableGradGuard : public AutoGradMode {
 public:
  EnableGradGuard() : AutoGradMode(true) {}
};

}  // namespace tandem
