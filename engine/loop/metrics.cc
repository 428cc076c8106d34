#include "engine/loop/metrics.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <sstream>

namespace berth {
namespace {

std::string Number(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

/// "2026-12-01T10:33:34Z" as unix seconds; 0 when it does not read as that.
double UnixTime(const std::string& rfc3339) {
  std::tm tm{};
  const char* end = strptime(rfc3339.c_str(), "%Y-%m-%dT%H:%M:%SZ", &tm);
  if (!end || *end != '\0') return 0;
  return static_cast<double>(timegm(&tm));
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
    crash_looping = report.crash_looping;
    restarts = report.restarts;
    change_held = report.change_held;
  }
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
  Metric(out, "berth_services_crash_looping", "gauge",
         "Services the manifest wants running whose unit systemd keeps restarting, or gave up on "
         "(not counted in berth_services_up).");
  out << "berth_services_crash_looping " << m.crash_looping.size() << "\n";
  if (!m.restarts.empty()) {
    Metric(out, "berth_service_crash_looping", "gauge",
           "1 when systemd keeps restarting the service's unit, or gave up on it, at the last "
           "pass.");
    for (const auto& [name, restarts] : m.restarts)
      out << "berth_service_crash_looping{service=\"" << LabelValue(name) << "\",unit=\""
          << LabelValue(name + ".service") << "\"} " << (m.crash_looping.count(name) ? 1 : 0)
          << "\n";
    Metric(out, "berth_service_restarts", "gauge",
           "Automatic restarts of the service's unit since it was last started on request "
           "(systemd's NRestarts), at the last pass.");
    for (const auto& [name, restarts] : m.restarts)
      out << "berth_service_restarts{service=\"" << LabelValue(name) << "\",unit=\""
          << LabelValue(name + ".service") << "\"} " << restarts << "\n";
  }
  Metric(out, "berth_change_held", "gauge",
         "1 while the manifest's change is held: it failed after taking a service down, and "
         "berth waits for the manifest to change or for berth apply --retry.");
  out << "berth_change_held " << (m.change_held ? 1 : 0) << "\n";
  out << BenchMetricsText(m.bench);
  out << FrontMetricsText(m.fronts);
  return out.str();
}

std::string FrontMetricsText(const std::vector<FrontMetrics>& fronts) {
  if (fronts.empty()) return "";
  std::ostringstream out;
  auto port = [](const FrontMetrics& f) { return "port=\"" + std::to_string(f.port) + "\""; };
  Metric(out, "berth_front_up", "gauge",
         "1 when the front of this port answered on its admin socket at the last write.");
  for (const auto& f : fronts)
    out << "berth_front_up{" << port(f) << "} " << (f.error.empty() ? 1 : 0) << "\n";
  Metric(out, "berth_front_requests_total", "counter",
         "HTTP requests the front of this port received (since its last start).");
  for (const auto& f : fronts)
    if (f.error.empty())
      out << "berth_front_requests_total{" << port(f) << "} " << f.stats.requests << "\n";
  Metric(out, "berth_front_responses_5xx_total", "counter",
         "5xx answers of the front of this port, 503s past the hold bound among them.");
  for (const auto& f : fronts)
    if (f.error.empty())
      out << "berth_front_responses_5xx_total{" << port(f) << "} " << f.stats.responses_5xx << "\n";
  Metric(out, "berth_front_held_seconds_total", "counter",
         "Seconds requests spent held by the front of this port while no backend served "
         "(one per hold round).");
  for (const auto& f : fronts)
    if (f.error.empty()) {
      const FrontServerStats* hold = f.stats.Server("hold");
      out << "berth_front_held_seconds_total{" << port(f) << "} "
          << (hold ? hold->total_sessions : 0) << "\n";
    }
  Metric(out, "berth_front_retries_total", "counter",
         "Retries of the front of this port's backend (each hold round is one).");
  for (const auto& f : fronts)
    if (f.error.empty())
      out << "berth_front_retries_total{" << port(f) << "} " << f.stats.retries << "\n";
  Metric(out, "berth_front_backend", "gauge",
         "1 for the server the front of this port routes new requests to (a service, or hold).");
  for (const auto& f : fronts)
    if (f.error.empty())
      for (const auto& s : f.stats.servers)
        out << "berth_front_backend{" << port(f) << ",server=\"" << LabelValue(s.name) << "\"} "
            << (s.status != "MAINT" && s.status != "DRAIN" &&
                        s.status.find("MAINT") == std::string::npos
                    ? 1
                    : 0)
            << "\n";
  return out.str();
}

std::string BenchMetricsText(const std::vector<BenchRecord>& records) {
  if (records.empty()) return "";
  std::ostringstream out;
  auto labels = [](const BenchRecord& r) {
    return "service=\"" + LabelValue(r.service) + "\",model=\"" +
           LabelValue(r.repo_id.empty() ? r.served_name : r.repo_id) + "\",commit=\"" +
           LabelValue(r.commit) + "\"";
  };
  Metric(out, "berth_bench_timestamp_seconds", "gauge",
         "When the last berth bench of this service, model and commit started, in unix seconds.");
  for (const auto& r : records)
    out << "berth_bench_timestamp_seconds{" << labels(r) << "} " << Number(UnixTime(r.time), 0)
        << "\n";
  Metric(out, "berth_bench_output_tokens_per_second", "gauge",
         "Output tokens per second berth bench measured at this concurrency.");
  for (const auto& r : records)
    for (const auto& l : r.levels)
      out << "berth_bench_output_tokens_per_second{" << labels(r) << ",concurrency=\""
          << l.concurrency << "\"} " << Number(l.output_tps, 3) << "\n";
  // vllm bench serve's figures (TPOT, E2E, req/s, goodput) only for levels that have them:
  // records written before berth measured them do not.
  auto any_level = [&](bool BenchLevel::*has) {
    for (const auto& r : records)
      for (const auto& l : r.levels)
        if (!has || l.*has) return true;
    return false;
  };
  struct Latency {
    const char* name;
    const char* help;
    double BenchLevel::*p50;
    double BenchLevel::*p90;
    double BenchLevel::*p99;
    bool BenchLevel::*has;  // null: every level has it
  };
  const Latency latencies[] = {
      {"berth_bench_ttft_seconds", "Time to first token berth bench measured, by quantile.",
       &BenchLevel::ttft_p50_ms, &BenchLevel::ttft_p90_ms, &BenchLevel::ttft_p99_ms, nullptr},
      {"berth_bench_itl_seconds", "Inter-token latency berth bench measured, by quantile.",
       &BenchLevel::itl_p50_ms, &BenchLevel::itl_p90_ms, &BenchLevel::itl_p99_ms, nullptr},
      {"berth_bench_tpot_seconds",
       "Time per output token berth bench measured (vLLM's TPOT: per request, after the first "
       "token), by quantile.",
       &BenchLevel::tpot_p50_ms, &BenchLevel::tpot_p90_ms, &BenchLevel::tpot_p99_ms,
       &BenchLevel::has_request_figures},
      {"berth_bench_e2e_latency_seconds",
       "Request latency berth bench measured, from sending to the last token, by quantile.",
       &BenchLevel::e2e_p50_ms, &BenchLevel::e2e_p90_ms, &BenchLevel::e2e_p99_ms,
       &BenchLevel::has_request_figures}};
  for (const auto& lat : latencies) {
    if (!any_level(lat.has)) continue;
    Metric(out, lat.name, "gauge", lat.help);
    for (const auto& r : records)
      for (const auto& l : r.levels) {
        if (lat.has && !(l.*lat.has)) continue;
        std::pair<const char*, double> qs[] = {
            {"0.5", l.*lat.p50}, {"0.9", l.*lat.p90}, {"0.99", l.*lat.p99}};
        for (const auto& [q, ms] : qs)
          out << lat.name << "{" << labels(r) << ",concurrency=\"" << l.concurrency
              << "\",quantile=\"" << q << "\"} " << Number(ms / 1000, 6) << "\n";
      }
  }
  auto per_level = [&](const char* name, const char* help, bool BenchLevel::*has,
                       double BenchLevel::*value) {
    if (!any_level(has)) return;
    Metric(out, name, "gauge", help);
    for (const auto& r : records)
      for (const auto& l : r.levels)
        if (l.*has)
          out << name << "{" << labels(r) << ",concurrency=\"" << l.concurrency << "\"} "
              << Number(l.*value, 3) << "\n";
  };
  per_level("berth_bench_requests_per_second",
            "Requests per second that berth bench saw finish at this concurrency.",
            &BenchLevel::has_request_figures, &BenchLevel::request_tps);
  per_level("berth_bench_goodput_requests_per_second",
            "Finished requests per second that met every goodput limit berth bench was given.",
            &BenchLevel::has_goodput, &BenchLevel::goodput_rps);
  Metric(out, "berth_bench_errors", "gauge", "Requests that failed in the last berth bench.");
  for (const auto& r : records)
    for (const auto& l : r.levels)
      out << "berth_bench_errors{" << labels(r) << ",concurrency=\"" << l.concurrency << "\"} "
          << l.errors << "\n";
  return out.str();
}

}  // namespace berth
