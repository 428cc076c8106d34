#include "engine/output/progress.h"

#include <cstdio>

#include "core/units.h"

namespace berth {

std::string ProgressPrinter::Line(const PullProgress& p, bool bar) {
  double rate = p.seconds > 0 ? static_cast<double>(p.bytes_fetched) / p.seconds : 0;
  double frac =
      p.bytes_total ? static_cast<double>(p.bytes_done) / static_cast<double>(p.bytes_total) : 1;
  std::string b;
  if (bar) {
    int filled = static_cast<int>(frac * 30);
    b = "[" + std::string(static_cast<size_t>(filled), '#') +
        std::string(static_cast<size_t>(30 - filled), '.') + "] ";
  }
  char pct[16];
  std::snprintf(pct, sizeof pct, "%3.0f%%", frac * 100);
  std::string eta = "--";
  if (rate > 0 && p.bytes_total > p.bytes_done)
    eta = FormatDurationMs(
        static_cast<uint64_t>(static_cast<double>(p.bytes_total - p.bytes_done) / rate) * 1000);
  return p.repo_id + " " + b + pct + " " + FormatBytes(p.bytes_done) + " / " +
         FormatBytes(p.bytes_total) + ", " + FormatBytes(static_cast<uint64_t>(rate)) + "/s, " +
         std::to_string(p.files_done) + "/" + std::to_string(p.files_total) + " files, ETA " + eta;
}

PullProgress ProgressPrinter::Total() const {
  PullProgress t;
  t.repo_id = "total";
  for (const auto* m : {&models_, &finished_})
    for (const auto& [repo, p] : *m) {
      t.bytes_done += p.bytes_done;
      t.bytes_total += p.bytes_total;
      t.bytes_fetched += p.bytes_fetched;
      t.files_done += p.files_done;
      t.files_total += p.files_total;
      t.seconds = std::max(t.seconds, p.seconds);
    }
  return t;
}

void ProgressPrinter::Draw(bool final_line_for_done, const std::string& done_repo) {
  size_t models = models_.size() + finished_.size();
  if (tty_) {
    // Move up over the last drawing and draw every model in progress, then the total.
    if (drawn_ > 0) out_ << "\033[" << drawn_ << "F";
    out_ << "\033[J";
    drawn_ = 0;
    if (final_line_for_done) out_ << Line(finished_.at(done_repo), false) << "\n";
    for (const auto& [repo, p] : models_) {
      out_ << Line(p, true) << "\n";
      ++drawn_;
    }
    if (models > 1 && !models_.empty()) {
      out_ << Line(Total(), true) << "\n";
      ++drawn_;
    }
    out_ << std::flush;
    return;
  }
  if (final_line_for_done) {
    out_ << Line(finished_.at(done_repo), false) << "\n";
    if (models > 1) out_ << Line(Total(), false) << "\n";
    out_ << std::flush;
    return;
  }
  for (const auto& [repo, p] : models_) out_ << Line(p, false) << "\n";
  if (models > 1) out_ << Line(Total(), false) << "\n";
  out_ << std::flush;
}

void ProgressPrinter::Update(const PullProgress& p) {
  std::lock_guard<std::mutex> l(mu_);
  models_[p.repo_id] = p;
  auto now = std::chrono::steady_clock::now();
  auto every = tty_ ? std::chrono::milliseconds(200) : log_every_;
  if (now - last_ < every) return;
  last_ = now;
  Draw(false, "");
}

void ProgressPrinter::Done(const PullProgress& p) {
  std::lock_guard<std::mutex> l(mu_);
  models_.erase(p.repo_id);
  finished_[p.repo_id] = p;
  Draw(true, p.repo_id);
}

const char* StepStateName(StepState s) {
  switch (s) {
    case StepState::kRunning:
      return "running";
    case StepState::kDone:
      return "done";
    case StepState::kFailed:
      return "failed";
  }
  return "?";
}

void ProgressLines::OnStep(const StepEvent& e) {
  if (e.state == StepState::kFailed || !e.action) return;  // the failure is reported as the run's
  std::lock_guard<std::mutex> l(mu_);
  out_ << "[" << e.step << "/" << e.steps << "] ";
  if (e.state == StepState::kRunning)
    out_ << ActionKindName(e.action->kind) << " " << e.action->address << " ...";
  else if (e.healthy_after_ms)
    out_ << e.action->unit << " healthy " << FormatDurationMs(e.healthy_after_ms)
         << " after its start";
  else
    out_ << "done in " << FormatDurationMs(e.elapsed_ms);
  out_ << std::endl;
}

void ProgressLines::OnNote(const std::string& line) {
  std::lock_guard<std::mutex> l(mu_);
  out_ << line << std::endl;
}

void ProgressLines::OnDownload(const PullProgress& p, bool finished) {
  if (finished)
    downloads_.Done(p);
  else
    downloads_.Update(p);
}

}  // namespace berth
