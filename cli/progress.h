// What tandem train shows while an epoch runs: on a terminal, one line
// redrawn in place (a bar, samples/s, the loss so far, time left); into a
// file or a pipe, a plain line every few seconds, with no control characters.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>

namespace tandem::cli {

class Progress {
 public:
  // interval: seconds between redraws (terminal) or lines (not a terminal);
  // <= 0 picks 0.1 s on a terminal and 5 s otherwise.
  Progress(std::FILE* out, double interval);
  bool is_terminal() const { return terminal_; }

  // Starts an epoch of `total` samples, `done` of them already (a resumed epoch).
  void start(const std::string& label, int64_t total, int64_t done);
  // After a step: `done` samples so far. loss_so_far is called only when a
  // line is drawn (it may wait for the device).
  void update(int64_t done, const std::function<double()>& loss_so_far);
  // Clears the terminal line (before the epoch's summary or a message).
  void clear();

 private:
  void draw(int64_t done, double loss);

  std::FILE* out_;
  bool terminal_;
  double interval_;
  std::string label_;
  int64_t total_ = 0, first_ = 0;
  std::chrono::steady_clock::time_point start_, last_;
  bool drawn_ = false;
};

}  // namespace tandem::cli
