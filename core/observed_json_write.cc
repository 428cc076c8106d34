// ObservedToJson (core/observed_json.h): each struct's members in the order of its list
// (core/observed_json_members.h), then what it carries only when known or not empty.
#include <nlohmann/json.hpp>

#include "core/json_text.h"
#include "core/observed_json.h"
#include "core/observed_json_members.h"

namespace berth {
namespace {

using nlohmann::ordered_json;

template <class T, class Members>
ordered_json ToJson(const T& x, const Members& members) {
  ordered_json j = ordered_json::object();
  ForEachMember(x, members, [&](std::string_view key, const auto& value) { j[key] = value; });
  return j;
}

template <class T, class Members>
ordered_json ListToJson(const std::vector<T>& xs, const Members& members) {
  ordered_json out = ordered_json::array();
  for (const T& x : xs) out.push_back(ToJson(x, members));
  return out;
}

ordered_json RevisionToJson(const ObservedRevision& v) {
  ordered_json j = ToJson(v, kRevisionJson);
  if (v.bytes_total) j["bytes_total"] = *v.bytes_total;
  if (v.config) {
    j["config"] = {{"architectures", v.config->architectures}};
    if (!v.config->model_type.empty()) j["config"]["model_type"] = v.config->model_type;
    j["config"]["problem"] = v.config->problem;
  }
  if (v.weights_bytes) j["weights_bytes"] = *v.weights_bytes;
  if (v.resident_bytes) j["resident_bytes"] = *v.resident_bytes;
  if (v.gguf) {
    ordered_json& g = j["gguf"] = ordered_json::object();
    for (const auto& [file, h] : *v.gguf) {
      g[file] = ToJson(h, kGgufHeaderJson);
      if (h.model) g[file]["model"] = ToJson(*h.model, kGgufModelJson);
    }
  }
  return j;
}

ordered_json StateToJson(const BerthState& s) {
  ordered_json j = ToJson(s, kStateJson);
  // Written only when there is something to say, so a healthy host's observation stays short.
  if (!s.failures.empty()) {
    ordered_json& failures = j["failures"] = ordered_json::object();
    for (const auto& [address, f] : s.failures) failures[address] = ToJson(f, kFailureJson);
  }
  if (!s.interrupted.empty()) j["interrupted"] = s.interrupted;
  if (!s.ungated.empty()) j["ungated"] = s.ungated;
  if (!s.started.empty()) j["started"] = s.started;
  if (!s.held.empty()) j["held"] = ToJson(s.held, kHeldJson);
  if (!s.learned.empty()) {
    ordered_json& learned = j["learned"] = ordered_json::object();
    for (const auto& [unit, l] : s.learned) {
      ordered_json gpus = ordered_json::object();
      for (const auto& [i, b] : l.gpu_bytes) gpus[std::to_string(i)] = b;
      learned[unit] = {{"ports", l.ports}, {"gpu_bytes", std::move(gpus)}};
    }
  }
  if (!s.start_times_ms.empty()) j["start_times_ms"] = s.start_times_ms;
  if (!s.start_invocations.empty()) j["start_invocations"] = s.start_invocations;
  if (!s.stop_times_ms.empty()) j["stop_times_ms"] = s.stop_times_ms;
  return j;
}

}  // namespace

std::string ObservedToJson(const Observed& o) {
  ordered_json j;
  j["format_version"] = Observed::kFormatVersion;
  j["hostname"] = o.hostname;
  j["observed_at"] = o.observed_at;
  ordered_json repos = ordered_json::array();
  for (const auto& r : o.store.repos) {
    ordered_json revs = ordered_json::array();
    for (const auto& v : r.revisions) revs.push_back(RevisionToJson(v));
    repos.push_back({{"repo_id", r.repo_id}, {"revisions", std::move(revs)}});
  }
  j["store"] = ToJson(o.store, kStoreJson);
  j["store"]["repos"] = std::move(repos);
  ordered_json devices = ordered_json::array();
  for (const auto& g : o.gpus) {
    devices.push_back(ToJson(g, kGpuJson));
    devices.back()["processes"] = ListToJson(g.processes, kGpuProcessJson);
  }
  j["gpus"] = {{"known", o.gpus_known}, {"error", o.gpu_error}, {"devices", std::move(devices)}};
  ordered_json units = ordered_json::array();
  for (const auto& u : o.units) {
    ordered_json& x = units.emplace_back(ToJson(u, kUnitJson));
    if (u.content_note != DefaultContentNote(u)) x["content_note"] = u.content_note;
    // Only when known, so observations of hosts seen before it existed stay byte for byte.
    if (u.active_enter_usec) x["active_enter_usec"] = u.active_enter_usec;
    if (u.timeout_stop_usec) x["timeout_stop_usec"] = u.timeout_stop_usec;
    if (u.last_start_ms) x["last_start_ms"] = *u.last_start_ms;
    if (u.crash_looping) x["crash_looping"] = true;
  }
  j["units"] = {{"known", o.units_known}, {"items", std::move(units)}};
  j["ports"] = {{"known", o.ports_known}, {"listening", ListToJson(o.ports, kPortJson)}};
  ordered_json hub = ordered_json::array();
  for (const auto& h : o.hub) {
    hub.push_back(ToJson(h, kHubJson));
    hub.back()["files"] = ListToJson(h.files, kHubFileJson);
  }
  j["hub"] = std::move(hub);
  // Only when observed (or why not), so observations saved before stay byte for byte.
  if (o.memory.known || !o.memory.error.empty()) j["memory"] = ToJson(o.memory, kMemoryJson);
  // Only when there are fronts, so observations of hosts without them stay byte for byte.
  if (!o.front_configs.empty()) {
    ordered_json& fronts = j["front_configs"] = ordered_json::object();
    for (const auto& [port, text] : o.front_configs) fronts[std::to_string(port)] = text;
  }
  // Only when a standby was asked, likewise.
  if (!o.sleeping.empty()) j["sleeping"] = o.sleeping;
  j["berth_state"] = StateToJson(o.state);
  if (!o.warnings.empty()) j["warnings"] = o.warnings;
  // A hand edit may leave bytes that are not UTF-8 in berth's own unit file: "\xNN" in the
  // JSON (the hash keeps the file's identity), never an exception.
  return DumpJson(j, 2) + "\n";
}

}  // namespace berth
