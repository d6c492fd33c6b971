// The epoch's progress line.
#include "cli/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>

#include "cli/common.h"

namespace tandem::cli {

namespace {
int terminal_width(std::FILE* out) {
  winsize ws{};
  if (ioctl(fileno(out), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  return 80;
}
}  // namespace

Progress::Progress(std::FILE* out, double interval) : out_(out), terminal_(isatty(fileno(out)) == 1) {
  interval_ = interval > 0 ? interval : (terminal_ ? 0.1 : 5.0);
}

void Progress::start(const std::string& label, int64_t total, int64_t done) {
  label_ = label;
  total_ = total;
  first_ = done;
  start_ = last_ = std::chrono::steady_clock::now();
  drawn_ = false;
}

void Progress::update(int64_t done, const std::function<double()>& loss_so_far) {
  auto now = std::chrono::steady_clock::now();
  if (std::chrono::duration<double>(now - last_).count() < interval_ || done >= total_) return;
  last_ = now;
  draw(done, loss_so_far());
}

void Progress::draw(int64_t done, double loss) {
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  double rate = elapsed > 0 ? static_cast<double>(done - first_) / elapsed : 0;
  double left = rate > 0 ? static_cast<double>(total_ - done) / rate : 0;
  double frac = total_ > 0 ? static_cast<double>(done) / static_cast<double>(total_) : 1;
  char stats[160];
  std::snprintf(stats, sizeof stats, "%3.0f%% %s/%s  %s samples/s  loss %.4f  %s left", 100 * frac,
                thousands(done).c_str(), thousands(total_).c_str(), compact(rate).c_str(), loss,
                clock_time(left).c_str());
  if (!terminal_) {
    std::fprintf(out_, "%s: %s\n", label_.c_str(), stats);
    std::fflush(out_);
    return;
  }
  // "epoch 1/10 [#####.....] stats", the bar taking what the width leaves.
  int width = terminal_width(out_);
  int bar = std::clamp(width - static_cast<int>(label_.size() + std::string(stats).size()) - 6, 0, 40);
  std::string line = label_ + " ";
  if (bar >= 10) {
    int filled = static_cast<int>(frac * bar);
    line += "[" + std::string(filled, '#') + std::string(bar - filled, '.') + "] ";
  }
  line += stats;
  if (static_cast<int>(line.size()) >= width) line.resize(std::max(0, width - 1));
  std::fprintf(out_, "\r%s\x1b[K", line.c_str());
  std::fflush(out_);
  drawn_ = true;
}

void Progress::clear() {
  if (terminal_ && drawn_) {
    std::fprintf(out_, "\r\x1b[K");
    std::fflush(out_);
  }
  drawn_ = false;
}

}  // namespace tandem::cli
