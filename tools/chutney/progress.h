// Progress reporting on stderr: a live bar on a terminal, plain periodic lines otherwise (logs,
// CI), nothing with --quiet.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace ctn_cli {

class Progress {
 public:
  Progress(std::string label, int64_t total_batches, int64_t batch_size, bool enabled);
  // Called after batch `done` (1-based) finished with `loss` (the running mean).
  void update(int64_t done, double loss);
  // Clears the live bar so the next stdout line starts clean.
  void finish();

 private:
  using Clock = std::chrono::steady_clock;
  std::string label_;
  int64_t total_;
  int64_t batch_size_;
  bool enabled_;
  bool tty_;
  Clock::time_point start_;
  Clock::time_point last_draw_;
  int64_t next_line_at_ = 0;  // plain mode: the batch at which the next line is printed
  bool drawn_ = false;
};

}  // namespace ctn_cli
