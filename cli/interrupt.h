// Ctrl-C during training: the first SIGINT asks the loop to stop at the end
// of its step (it then writes a checkpoint); a second one exits at once with
// code 130, except while a checkpoint is being written (CriticalSection):
// then it exits as soon as the write is done, so no half-written file stays.
#pragma once

namespace tandem::cli {

// Installs the SIGINT handler, unless the program was started with SIGINT
// ignored (then Ctrl-C stays ignored, as the parent asked).
void install_interrupt_handler();
bool interrupt_requested();

class CriticalSection {
 public:
  CriticalSection();
  ~CriticalSection();
  CriticalSection(const CriticalSection&) = delete;
  CriticalSection& operator=(const CriticalSection&) = delete;
};

}  // namespace tandem::cli
