#include "progress.h"

#include <algorithm>
#include <cstdio>

#include "cli.h"

namespace ctn_cli {
namespace {

std::string format_eta(double seconds) {
  if (seconds < 0 || seconds > 99 * 3600) return "--:--";
  int s = static_cast<int>(seconds + 0.5);
  char buf[32];
  if (s >= 3600) {
    std::snprintf(buf, sizeof buf, "%d:%02d:%02d", s / 3600, (s / 60) % 60, s % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%d:%02d", s / 60, s % 60);
  }
  return buf;
}

}  // namespace

Progress::Progress(std::string label, int64_t total_batches, int64_t batch_size, bool enabled)
    : label_(std::move(label)),
      total_(std::max<int64_t>(total_batches, 1)),
      batch_size_(batch_size),
      enabled_(enabled),
      tty_(stderr_is_tty()),
      start_(Clock::now()),
      last_draw_(start_) {
  next_line_at_ = (total_ + 9) / 10;
}

void Progress::update(int64_t done, double loss) {
  if (!enabled_) return;
  Clock::time_point now = Clock::now();
  double elapsed = std::chrono::duration<double>(now - start_).count();
  double rate = elapsed > 0 ? static_cast<double>(done * batch_size_) / elapsed : 0.0;
  double eta = done > 0 ? elapsed * static_cast<double>(total_ - done) / static_cast<double>(done)
                        : -1.0;
  if (tty_) {
    // Redrawing more than ~10 times a second costs time and nobody can read it.
    if (done != total_ && drawn_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
    last_draw_ = now;
    drawn_ = true;
    constexpr int kWidth = 24;
    int filled = static_cast<int>(kWidth * done / total_);
    std::string bar(static_cast<size_t>(filled), '#');
    bar.append(static_cast<size_t>(kWidth - filled), '.');
    std::fprintf(stderr, "\r\033[K%s [%s] %lld/%lld  %.0f img/s  loss %.4f  ETA %s",
                 label_.c_str(), bar.c_str(), static_cast<long long>(done),
                 static_cast<long long>(total_), rate, loss, format_eta(eta).c_str());
    std::fflush(stderr);
    return;
  }
  if (done < next_line_at_ && done != total_) return;
  while (next_line_at_ <= done) next_line_at_ += (total_ + 9) / 10;
  std::fprintf(stderr, "%s batch %lld/%lld  %.0f img/s  loss %.4f  ETA %s\n", label_.c_str(),
               static_cast<long long>(done), static_cast<long long>(total_), rate, loss,
               format_eta(eta).c_str());
}

void Progress::finish() {
  if (enabled_ && tty_ && drawn_) {
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
  }
  drawn_ = false;
}

}  // namespace ctn_cli
