#include "engine/output/status_view.h"

#include <nlohmann/json.hpp>
#include <sstream>

#include "core/hf_cache.h"
#include "core/json_text.h"
#include "core/units.h"
#include "core/untrusted_text.h"

namespace berth {
namespace {

const char* WantedName(ServiceState s) {
  switch (s) {
    case ServiceState::kRunning:
      return "running";
    case ServiceState::kStopped:
      return "stopped";
    case ServiceState::kAbsent:
      return "absent";
  }
  return "?";
}

std::string Short(const std::string& commit) { return commit.substr(0, 7); }

std::string Rfc3339(uint64_t usec) {
  time_t t = static_cast<time_t>(usec / 1000000);
  struct tm tm {};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

std::string CommitInUnit(const std::string& unit_text) {
  const std::string marker = "/snapshots/";
  for (size_t at = unit_text.find(marker); at != std::string::npos;
       at = unit_text.find(marker, at + 1)) {
    std::string candidate = unit_text.substr(at + marker.size(), 40);
    if (IsCommit(candidate)) return candidate;
  }
  return "";
}

StatusView MakeStatus(const Desired& d, const Observed& o,
                      const std::map<std::string, std::string>& health,
                      const std::vector<BenchRecord>& bench) {
  StatusView v;
  v.host = o.hostname;
  v.warnings = o.warnings;
  if (!o.state.held.empty())
    v.held = o.state.held.address + " failed at " + o.state.held.time +
             " and is held: " + o.state.held.message;
  for (const auto& [name, s] : d.services) {
    ServiceStatus st;
    st.name = name;
    st.unit = s.UnitName();
    st.wanted = WantedName(s.state);
    st.port = s.port.value_or(0);
    st.model = s.model;
    if (!s.model.empty() && d.models.count(s.model)) st.repo = d.models.at(s.model).repo_id;
    if (const ObservedUnit* u = o.FindUnit(st.unit)) {
      st.active = u->active_state;
      st.sub = u->sub_state;
      st.boot = u->unit_file_state;
      st.restarts = u->n_restarts;
      if (u->crash_looping) st.crash_looping = CrashLoopDetail(*u);
      st.asleep = o.Asleep(u->name);
      st.commit = CommitInUnit(u->content);
      if (u->IsActive()) st.active_since_usec = u->active_enter_usec;
    } else {
      st.active = "not-found";
    }
    if (s.on_demand) {
      const ObservedUnit* sock = o.FindUnit(OnDemandSocketName(name));
      st.on_demand = !sock || !sock->IsActive()  ? "closed"
                     : st.active == "activating" ? "starting"
                     : st.active == "active"     ? "running"
                                                 : "idle";
      st.port = s.PublicPort();
    }
    if (auto h = health.find(name); h != health.end()) st.health = h->second;
    if (auto t = o.state.start_times_ms.find(st.unit);
        t != o.state.start_times_ms.end() && !t->second.empty())
      st.last_start_ms = t->second.back();
    // A start a request made, which systemd timed and berth has not recorded yet, is newer.
    if (const ObservedUnit* u = o.FindUnit(st.unit); u && s.on_demand)
      if (std::optional<uint64_t> seen = o.state.UnrecordedStart(*u)) st.last_start_ms = seen;
    for (const BenchRecord& b : bench)  // oldest first: the last one wins
      if (b.service == name && !b.levels.empty()) {
        st.last_bench = b.levels.back();
        st.last_bench_time = b.time;
      }
    v.services.push_back(st);
  }
  for (const auto& [name, m] : d.models) {
    ModelStatus ms;
    ms.name = name;
    ms.repo = m.repo_id;
    ms.revision = m.revision;
    if (const LockEntry* pin = d.PinFor(m)) ms.pinned = pin->commit;
    if (const ObservedRepo* repo = o.FindRepo(m.repo_id))
      for (const ObservedRevision& r : repo->revisions)
        ms.revisions.push_back({r.commit, r.complete, r.bytes_present, r.refs});
    for (const auto& [sname, s] : d.services)
      for (const std::string& key : s.ModelKeys())
        if (key == name && s.state == ServiceState::kRunning) ms.used_by.push_back(sname);
    v.models.push_back(ms);
  }
  return v;
}

std::string StatusText(const StatusView& v, double now_unix) {
  std::ostringstream out;
  out << "berth status of host " << v.host << "\n\nservices:\n";
  if (v.services.empty()) out << "  (the manifest names none)\n";
  for (const ServiceStatus& s : v.services) {
    out << "  " << s.name << " (" << s.unit << "): ";
    if (!s.crash_looping.empty())  // not up, whatever systemd's state says this moment
      out << "crash-looping (" << s.crash_looping << ")";
    else
      out << s.active << (s.sub.empty() || s.active == "not-found" ? "" : "/" + s.sub);
    if (s.asleep) out << ", asleep (standby: its GPU memory freed, woken on a switch back)";
    if (!s.on_demand.empty()) out << ", on demand: " << s.on_demand;
    out << ", wanted " << s.wanted;
    if (!s.boot.empty()) out << ", " << s.boot << " at boot";
    out << "\n";
    if (!s.repo.empty())
      out << "      model " << s.model << ": " << s.repo << "@"
          << (s.commit.empty() ? std::string("?") : Short(s.commit)) << "\n";
    if (s.active_since_usec) {
      double up = now_unix - static_cast<double>(s.active_since_usec) / 1e6;
      out << "      since " << Rfc3339(s.active_since_usec) << " ("
          << FormatDurationMs(up > 0 ? static_cast<uint64_t>(up * 1000) : 0) << ")\n";
    }
    if (s.port) out << "      port " << s.port << (s.health.empty() ? "" : ": " + s.health) << "\n";
    if (s.last_start_ms)
      out << "      last start: healthy " << FormatDurationMs(*s.last_start_ms)
          << " after it began\n";
    if (s.last_bench)
      out << "      last bench (" << s.last_bench_time
          << "): " << FormatDouble(s.last_bench->output_tps) << " output tok/s at concurrency "
          << s.last_bench->concurrency << ", TTFT p50 " << FormatDouble(s.last_bench->ttft_p50_ms)
          << " ms\n";
  }
  out << "\nmodels:\n";
  if (v.models.empty()) out << "  (the manifest names none)\n";
  for (const ModelStatus& m : v.models) {
    out << "  " << m.name << ": " << m.repo << " " << m.revision;
    if (!m.pinned.empty()) out << " (pinned at " << Short(m.pinned) << ")";
    out << "; used by " << (m.used_by.empty() ? std::string("no running service") : "");
    for (size_t i = 0; i < m.used_by.size(); ++i) out << (i ? ", " : "") << m.used_by[i];
    out << "\n";
    if (m.revisions.empty()) out << "      not in the store\n";
    for (const RevisionStatus& r : m.revisions) {
      out << "      " << Short(r.commit) << "  " << FormatBytes(r.bytes) << "  "
          << (r.complete ? "complete" : "partial");
      for (const auto& ref : r.refs) out << "  (" << ref << ")";
      out << "\n";
    }
  }
  if (!v.held.empty()) out << "\nheld: " << v.held << "\n";
  for (const auto& w : v.warnings) out << "warning: " << w << "\n";
  // What systemd, the state's records and the servers said is quoted above: none of it may
  // steer the terminal.
  return EscapeControl(out.str());
}

std::string StatusJson(const StatusView& v) {
  using nlohmann::ordered_json;
  ordered_json services = ordered_json::array();
  for (const ServiceStatus& s : v.services) {
    ordered_json j = {
        {"name", s.name},     {"unit", s.unit},     {"wanted", s.wanted},
        {"active", s.active}, {"sub", s.sub},       {"boot", s.boot},
        {"model", s.model},   {"repo_id", s.repo},  {"commit", s.commit},
        {"port", s.port},     {"health", s.health}, {"active_since_usec", s.active_since_usec}};
    j["restarts"] = s.restarts;
    j["crash_looping"] = !s.crash_looping.empty();
    j["crash_loop_detail"] = s.crash_looping;
    j["asleep"] = s.asleep;
    if (!s.on_demand.empty()) j["on_demand"] = s.on_demand;
    j["last_start_ms"] = s.last_start_ms ? ordered_json(*s.last_start_ms) : ordered_json(nullptr);
    if (s.last_bench)
      j["last_bench"] = {{"time", s.last_bench_time},
                         {"concurrency", s.last_bench->concurrency},
                         {"output_tps", s.last_bench->output_tps},
                         {"ttft_p50_ms", s.last_bench->ttft_p50_ms},
                         {"ttft_p99_ms", s.last_bench->ttft_p99_ms}};
    else
      j["last_bench"] = nullptr;
    services.push_back(j);
  }
  ordered_json models = ordered_json::array();
  for (const ModelStatus& m : v.models) {
    ordered_json revs = ordered_json::array();
    for (const RevisionStatus& r : m.revisions)
      revs.push_back(
          {{"commit", r.commit}, {"complete", r.complete}, {"bytes", r.bytes}, {"refs", r.refs}});
    models.push_back({{"name", m.name},
                      {"repo_id", m.repo},
                      {"revision", m.revision},
                      {"pinned", m.pinned},
                      {"revisions", revs},
                      {"used_by", m.used_by}});
  }
  ordered_json j = {{"format_version", 1}, {"host", v.host}, {"services", services},
                    {"models", models},    {"held", v.held}, {"warnings", v.warnings}};
  return DumpJson(j, 2) + "\n";
}

}  // namespace berth
