#include "engine/loop/metrics.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sstream>

namespace berth {
namespace {

std::string Number(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

void Metric(std::ostream& out, const char* name, const char* type, const char* help) {
  out << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n";
}

// A label value as the text format wants it: backslash, double quote and newline escaped.
std::string LabelValue(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"')
      out += std::string("\\") + c;
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

}  // namespace

const char* FailureKind(Outcome outcome) {
  switch (outcome) {
    case Outcome::kNoChanges:
    case Outcome::kApplied:
    case Outcome::kPlanned:
      return nullptr;
    case Outcome::kFailed:
      return "failed";
    case Outcome::kError:
    case Outcome::kNotConfirmed:
      return "error";
    case Outcome::kBlocked:
      return "blocked";
    case Outcome::kInvalid:
      return "invalid_manifest";
    case Outcome::kStale:
      return "stale_plan";
    case Outcome::kInterrupted:
      return "interrupted";
    case Outcome::kHeld:
      return "held";
  }
  return "error";
}

void LoopMetrics::Record(const RunReport& report, double started_unix, double duration_s) {
  last_run_timestamp = started_unix;
  run_duration = duration_s;
  bytes_downloaded += report.exec.bytes_downloaded;
  if (report.observed) {
    services_up = report.services_up;
    services_wanted = report.services_wanted;
    service_up = report.service_up;
  }
  change_held = report.outcome == Outcome::kHeld;
  const char* kind = FailureKind(report.outcome);
  if (!kind) {
    last_success_timestamp = started_unix;
    pending_changes = report.outcome == Outcome::kPlanned ? report.plan.actions.size() : 0;
    return;
  }
  pending_changes = report.plan.actions.size();
  for (size_t i = 0; i < kFailureKinds.size(); ++i)
    if (std::strcmp(kFailureKinds[i], kind) == 0) ++failures[i];
}

std::string MetricsText(const LoopMetrics& m) {
  std::ostringstream out;
  Metric(out, "berth_up", "gauge", "1 while the berth reconcile loop runs; 0 once it stopped.");
  out << "berth_up " << (m.up ? 1 : 0) << "\n";
  Metric(out, "berth_last_run_timestamp_seconds", "gauge",
         "When the last reconcile pass started, in unix seconds.");
  out << "berth_last_run_timestamp_seconds " << Number(m.last_run_timestamp, 3) << "\n";
  Metric(out, "berth_last_success_timestamp_seconds", "gauge",
         "When the last successful reconcile pass started, in unix seconds (0: none yet).");
  out << "berth_last_success_timestamp_seconds " << Number(m.last_success_timestamp, 3) << "\n";
  Metric(out, "berth_run_duration_seconds", "gauge", "How long the last reconcile pass took.");
  out << "berth_run_duration_seconds " << Number(m.run_duration, 3) << "\n";
  Metric(out, "berth_pending_changes", "gauge",
         "Actions of the last plan that were not applied (0 after a successful apply).");
  out << "berth_pending_changes " << m.pending_changes << "\n";
  Metric(out, "berth_failures_total", "counter", "Reconcile passes that did not succeed, by kind.");
  for (size_t i = 0; i < kFailureKinds.size(); ++i)
    out << "berth_failures_total{kind=\"" << kFailureKinds[i] << "\"} " << m.failures[i] << "\n";
  Metric(out, "berth_bytes_downloaded_total", "counter",
         "Bytes of model files downloaded since the loop started.");
  out << "berth_bytes_downloaded_total " << m.bytes_downloaded << "\n";
  Metric(out, "berth_services_up", "gauge",
         "Services the manifest wants running that were running after the last pass.");
  out << "berth_services_up " << m.services_up << "\n";
  Metric(out, "berth_services_wanted", "gauge", "Services the manifest wants running.");
  out << "berth_services_wanted " << m.services_wanted << "\n";
  if (!m.service_up.empty()) {
    Metric(out, "berth_service_up", "gauge",
           "1 when the service (a unit the manifest wants running) ran at the last pass.");
    for (const auto& [name, up] : m.service_up)
      out << "berth_service_up{service=\"" << LabelValue(name) << "\",unit=\""
          << LabelValue(name + ".service") << "\"} " << (up ? 1 : 0) << "\n";
  }
  Metric(out, "berth_change_held", "gauge",
         "1 while the manifest's change is held: it failed after taking a service down, and "
         "berth waits for the manifest to change or for berth apply --retry.");
  out << "berth_change_held " << (m.change_held ? 1 : 0) << "\n";
  return out.str();
}

}  // namespace berth
