#include "engine/output/progress.h"

#include <cstdio>

#include "engine/core/units.h"

namespace berth {

std::string ProgressPrinter::Line(const PullProgress& p) const {
  double rate = p.seconds > 0 ? static_cast<double>(p.bytes_fetched) / p.seconds : 0;
  double frac =
      p.bytes_total ? static_cast<double>(p.bytes_done) / static_cast<double>(p.bytes_total) : 1;
  std::string bar;
  if (tty_) {
    int filled = static_cast<int>(frac * 30);
    bar = "[" + std::string(static_cast<size_t>(filled), '#') +
          std::string(static_cast<size_t>(30 - filled), '.') + "] ";
  }
  char pct[16];
  std::snprintf(pct, sizeof pct, "%3.0f%%", frac * 100);
  std::string eta = "--";
  if (rate > 0 && p.bytes_total > p.bytes_done)
    eta = FormatDurationMs(
        static_cast<uint64_t>(static_cast<double>(p.bytes_total - p.bytes_done) / rate) * 1000);
  return p.repo_id + " " + bar + pct + " " + FormatBytes(p.bytes_done) + " / " +
         FormatBytes(p.bytes_total) + ", " + FormatBytes(static_cast<uint64_t>(rate)) + "/s, " +
         std::to_string(p.files_done) + "/" + std::to_string(p.files_total) + " files, ETA " + eta;
}

void ProgressPrinter::Update(const PullProgress& p) {
  auto now = std::chrono::steady_clock::now();
  if (tty_) {
    out_ << "\r\033[K" << Line(p) << std::flush;
    return;
  }
  if (now - last_ < log_every_) return;
  last_ = now;
  out_ << Line(p) << std::endl;
}

void ProgressPrinter::Done(const PullProgress& p) {
  if (tty_) out_ << "\r\033[K";
  out_ << Line(p) << std::endl;
}

}  // namespace berth
