#include "engine/apply/saved_plan.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <string_view>

#include "core/desired.h"
#include "core/hash.h"
#include "core/json_scan.h"
#include "core/json_text.h"
#include "core/units.h"
#include "core/untrusted_text.h"
#include "planners/plan_index.h"

namespace berth {
namespace {

using nlohmann::ordered_json;

const ActionKind kKinds[] = {
    ActionKind::kDownload,   ActionKind::kRemoveModel,  ActionKind::kWriteUnit,
    ActionKind::kRemoveUnit, ActionKind::kDaemonReload, ActionKind::kStart,
    ActionKind::kStop,       ActionKind::kRestart,      ActionKind::kWaitHealthy,
    ActionKind::kEnable,     ActionKind::kDisable,      ActionKind::kPreflight,
    ActionKind::kSmoke,      ActionKind::kFloor,        ActionKind::kSoak,
    ActionKind::kWriteFront, ActionKind::kRoute,        ActionKind::kDrain,
    ActionKind::kReady,      ActionKind::kReference,    ActionKind::kPrewarm,
    ActionKind::kSleep,      ActionKind::kWake};

ordered_json ResourcesToJson(const Resources& r) {
  ordered_json g = ordered_json::object();
  for (const auto& [i, b] : r.gpu_bytes) g[std::to_string(i)] = b;
  return {{"disk_bytes", r.disk_bytes}, {"gpu_bytes", g}, {"ports", r.ports}};
}

Resources ResourcesFromJson(const ordered_json& j) {
  Resources r;
  r.disk_bytes = j.value("disk_bytes", uint64_t{0});
  for (auto it = j.at("gpu_bytes").begin(); it != j.at("gpu_bytes").end(); ++it) {
    const std::string& key = it.key();
    int gpu = -1;
    auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), gpu);
    if (ec != std::errc() || end != key.data() + key.size() || gpu < 0)
      throw std::invalid_argument("gpu_bytes key '" + key.substr(0, 20) + "' is not a GPU index");
    r.gpu_bytes[gpu] = it.value().get<uint64_t>();
  }
  r.ports = j.value("ports", std::vector<int>{});
  return r;
}

std::string UnitFacts(const ObservedUnit* u) {
  if (!u) return "absent";
  return u->load_state + "|" + u->active_state + "|" + u->sub_state + "|" + u->content_hash + "|" +
         (u->need_daemon_reload ? "reload" : "") + "|" + u->unit_file_state;
}

// Each payload as a saved plan keeps it (the step's "step" object): the fields of its
// descriptor (core/steps.h: kStepFields), which the reader takes back.
template <class T>
ordered_json PayloadToJson(const T& payload) {
  ordered_json j = ordered_json::object();
  ForEachStepField(payload, [&](const auto& field, const auto& value) {
    if (field.key) j[field.key] = value;
  });
  return j;
}

ordered_json StepToJson(const StepPayload& step) {
  return std::visit([](const auto& x) { return PayloadToJson(x); }, step);
}

// The payload of kind `k` from `j`: every field this berth writes must be there, and nothing
// else ("" when so, else what is wrong). A type mismatch throws (the caller catches it).
std::string StepFromJson(ActionKind k, const ordered_json& j, const std::string& where,
                         StepPayload* out) {
  *out = PayloadFor(k);
  if (!j.is_object()) return where + " (" + ActionKindName(k) + "): its step is not an object";
  std::string problem;
  size_t seen = 0;
  std::visit(
      [&](auto& payload) {
        ForEachStepField(payload, [&](const auto& field, auto& value) {
          const char* key = field.key;
          if (!key || !problem.empty()) return;
          auto it = j.find(key);
          if (it == j.end()) {
            problem = where + " (" + ActionKindName(k) + ") has no step field '" + key + "'";
            return;
          }
          ++seen;
          try {
            it->get_to(value);
          } catch (const std::invalid_argument& e) {  // a field of a nested value (figures)
            problem = where + " (" + ActionKindName(k) + ") has the step field '" + key +
                      "' that is not valid: " + e.what();
          } catch (const std::exception&) {
            problem = where + " (" + ActionKindName(k) + ") has the step field '" + key +
                      "' of the wrong type (" + it->type_name() + ")";
          }
        });
      },
      *out);
  if (problem.empty() && seen != j.size())
    problem = where + " (" + std::string(ActionKindName(k)) +
              ") has a step field this berth does not write for it (a saved plan is refused "
              "whole, not read in part)";
  return problem;
}

// A gate as a saved plan keeps it (Replaced::gate): what the probe dials and how long it waits.
ordered_json GateToJson(const HealthStep& g) { return PayloadToJson(g); }

HealthStep GateFromJson(const ordered_json& j, const std::string& where, std::string* problem) {
  StepPayload p;
  *problem = StepFromJson(ActionKind::kWaitHealthy, j, where, &p);
  return problem->empty() ? std::get<HealthStep>(p) : HealthStep{};
}

ordered_json SwitchesToJson(const Plan& plan) {
  ordered_json out = ordered_json::array();
  for (const Switch& sw : plan.switches) {
    ordered_json replaces = ordered_json::array();
    for (const Replaced& r : sw.replaces)
      replaces.push_back({{"address", r.address},
                          {"unit", r.unit},
                          {"stop_step", r.stop_step},
                          {"gate", GateToJson(r.gate)},
                          {"asleep", r.asleep},
                          {"wake", PayloadToJson(r.wake)}});
    out.push_back({{"address", sw.address},
                   {"unit", sw.unit},
                   {"mode", SwitchModeName(sw.mode)},
                   {"steps", sw.steps},
                   {"start", sw.start},
                   {"gates", sw.gates},
                   {"health_gate", sw.health_gate ? ordered_json(*sw.health_gate) : nullptr},
                   {"replaces", replaces},
                   {"restores_unit", sw.restores_unit},
                   {"needs_turn", sw.needs_turn},
                   {"front_port", sw.front_port},
                   {"front_socket", sw.front_socket},
                   {"backend_port", sw.backend_port},
                   {"undo_route", sw.undo_route},
                   {"group", sw.group}});
  }
  return out;
}

ordered_json GroupsToJson(const Plan& plan) {
  ordered_json out = ordered_json::array();
  for (const ParallelGroup& g : plan.groups) {
    ordered_json chains = ordered_json::array();
    for (const Chain& c : g.chains) chains.push_back({c.start, c.gate, c.last});
    out.push_back({{"first", g.first}, {"last", g.last}, {"chains", chains}});
  }
  return out;
}

ordered_json DownloadsToJson(const Plan& plan) {
  ordered_json out = ordered_json::array();
  for (const DownloadBatch& b : plan.downloads) out.push_back({b.first, b.last});
  return out;
}

const SwitchMode kModes[] = {SwitchMode::kFresh,           SwitchMode::kStartFirst,
                             SwitchMode::kStopFirst,       SwitchMode::kInPlace,
                             SwitchMode::kMakeBeforeBreak, SwitchMode::kHold};

}  // namespace

SavedPlan MakeSavedPlan(const Plan& plan, const Desired& desired, const Observed& observed,
                        const std::string& manifest_path, int64_t now_unix) {
  SavedPlan s;
  s.plan = plan;
  s.manifest_path = manifest_path;
  s.manifest_digest = desired.digest;
  s.host = observed.hostname;
  s.state_lineage = observed.state.lineage;
  s.state_serial = observed.state.serial;
  s.created_unix = now_unix;
  s.fingerprints = Fingerprint(plan, observed);
  return s;
}

std::map<std::string, std::string> Fingerprint(const Plan& plan, const Observed& o) {
  std::map<std::string, std::string> out;
  out["host"] = Sha256Hex(o.hostname);
  std::set<int> ports, gpus;
  const PlanIndex index(o);
  for (const Action& a : plan.actions) {
    if (!a.unit.empty()) out["unit/" + a.unit] = Sha256Hex(UnitFacts(index.Unit(a.unit)));
    std::string repo_id;
    if (const auto* d = std::get_if<DownloadStep>(&a.step)) repo_id = d->repo_id;
    if (const auto* m = std::get_if<RemoveModelStep>(&a.step)) repo_id = m->repo_id;
    if (!repo_id.empty()) {
      std::string facts;
      if (const ObservedRepo* r = index.Repo(repo_id))
        for (const auto& v : r->revisions)
          facts +=
              v.commit + ":" + (v.complete ? "complete" : std::to_string(v.bytes_present)) + ";";
      out["model/" + repo_id] = Sha256Hex(facts);
    }
    for (int p : a.requires_.ports) ports.insert(p);
    for (const auto& [g, b] : a.requires_.gpu_bytes) gpus.insert(g);
  }
  std::map<int, std::vector<std::string>> holders_of;  // port -> "pid/unit" of each listener
  for (const auto& l : o.ports)
    if (ports.count(l.port)) holders_of[l.port].push_back(std::to_string(l.pid) + "/" + l.unit);
  for (int p : ports) {
    std::vector<std::string>& holders = holders_of[p];
    std::sort(holders.begin(), holders.end());
    std::string facts;
    for (const auto& h : holders) facts += h + ";";
    out["port/" + std::to_string(p)] = Sha256Hex(facts);
  }
  for (int g : gpus) {
    std::string facts = "unknown";
    if (const ObservedGpu* d = o.FindGpu(g)) {
      std::vector<std::string> procs;
      for (const auto& p : d->processes) procs.push_back(std::to_string(p.pid) + "/" + p.unit);
      std::sort(procs.begin(), procs.end());
      facts = std::to_string(d->memory_total) + ":";
      for (const auto& p : procs) facts += p + ";";
    }
    out["gpu/" + std::to_string(g)] = Sha256Hex(facts);
  }
  return out;
}

std::string SavedPlanToJson(const SavedPlan& p) {
  ordered_json j;
  j["format_version"] = SavedPlan::kFormatVersion;
  j["berth_version"] = BERTH_VERSION;
  j["host"] = p.host;
  j["created_unix"] = p.created_unix;
  j["manifest"] = {{"path", p.manifest_path}, {"digest", p.manifest_digest}};
  j["state"] = {{"lineage", p.state_lineage}, {"serial", p.state_serial}};
  j["fingerprints"] = p.fingerprints;
  ordered_json actions = ordered_json::array();
  for (const Action& a : p.plan.actions)
    actions.push_back({{"kind", ActionKindName(a.kind)},
                       {"address", a.address},
                       {"reason", ReasonName(a.reason)},
                       {"detail", a.detail},
                       {"requires", ResourcesToJson(a.requires_)},
                       {"frees", ResourcesToJson(a.frees)},
                       {"unit", a.unit},
                       {"takes_down", a.takes_down},
                       {"step", StepToJson(a.step)}});
  j["actions"] = actions;
  j["switches"] = SwitchesToJson(p.plan);
  j["groups"] = GroupsToJson(p.plan);
  j["downloads"] = DownloadsToJson(p.plan);
  return DumpJson(j, 2) + "\n";
}

namespace {

// The keys this berth writes at each place of a saved plan, from what SavedPlanToJson writes:
// anything else is not of its making (a field this berth does not know it checks nothing).
struct KnownKeys {
  std::set<std::string> top, manifest, state, action, resources, switch_, replaced, group;
};

const KnownKeys& Known() {
  static const KnownKeys known = [] {
    SavedPlan sample;
    sample.plan.actions.emplace_back();
    sample.plan.switches.emplace_back().replaces.emplace_back();
    sample.plan.groups.emplace_back();
    ordered_json j = ordered_json::parse(SavedPlanToJson(sample));
    KnownKeys k;
    for (const auto& [key, v] : j.items()) k.top.insert(key);
    for (const auto& [key, v] : j["manifest"].items()) k.manifest.insert(key);
    for (const auto& [key, v] : j["state"].items()) k.state.insert(key);
    for (const auto& [key, v] : j["actions"][0].items()) k.action.insert(key);
    for (const auto& [key, v] : j["actions"][0]["requires"].items()) k.resources.insert(key);
    for (const auto& [key, v] : j["switches"][0].items()) k.switch_.insert(key);
    for (const auto& [key, v] : j["switches"][0]["replaces"][0].items()) k.replaced.insert(key);
    for (const auto& [key, v] : j["groups"][0].items()) k.group.insert(key);
    return k;
  }();
  return known;
}

// "" when `j` is an object of known keys only, else what is wrong with it.
std::string UnknownKeys(const ordered_json& j, const std::set<std::string>& known,
                        const std::string& where) {
  if (!j.is_object()) return where + " is not an object";
  for (const auto& [key, v] : j.items())
    if (!known.count(key))
      return where + " has the field '" + key.substr(0, 80) +
             "', which this berth does not write (a saved plan is refused whole, not read in "
             "part)";
  return "";
}

// The parse of a saved plan's text, refusing what another reader could take differently from
// berth: a UTF-8 byte-order mark (nlohmann skips it, other readers do not), and a key written
// twice in one object (berth would act on the last, a reviewer's tool shows the first).
// `problem` says what is wrong; a syntax error throws (the caller catches it).
ordered_json ParseStrict(const std::string& text, std::string* problem) {
  if (text.rfind("\xEF\xBB\xBF", 0) == 0) {
    *problem = "it starts with a UTF-8 byte-order mark, which berth never writes";
    return nullptr;
  }
  if (JsonNestedDeeperThan(text, kMaxJsonDepth)) {  // nlohmann's parser would overflow the stack
    *problem = "it nests arrays and objects deeper than " + std::to_string(kMaxJsonDepth) +
               " levels, which berth never writes";
    return nullptr;
  }
  struct Open {
    std::string name;  // the key that holds the object ("" for the document, an array's item)
    std::set<std::string> keys;
    std::string last;
  };
  std::vector<Open> open;
  std::string duplicate;
  auto check = [&](int, ordered_json::parse_event_t event, ordered_json& parsed) {
    using Event = ordered_json::parse_event_t;
    if (event == Event::object_start) {
      open.push_back({open.empty() ? "" : open.back().last, {}, ""});
    } else if (event == Event::object_end) {
      if (!open.empty()) open.pop_back();
    } else if (event == Event::array_start && !open.empty()) {
      open.back().last += "[]";
    } else if (event == Event::key && !open.empty()) {
      std::string key = parsed.get<std::string>();
      if (!open.back().keys.insert(key).second && duplicate.empty()) {
        std::string where;
        for (const Open& o : open)
          if (!o.name.empty()) where += (where.empty() ? "" : ".") + o.name;
        duplicate = "the key '" + key.substr(0, 80) + "' appears twice in one object" +
                    (where.empty() ? "" : " (in " + where + ")");
      }
      open.back().last = key;
    }
    return true;
  };
  ordered_json j = ordered_json::parse(text, check);
  if (!duplicate.empty()) *problem = duplicate;
  return j;
}

bool IsDigest(const ordered_json& v) {
  if (!v.is_string()) return false;
  const std::string& s = v.get_ref<const std::string&>();
  return s.size() == 64 && s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

// The switches and groups of a saved plan into `plan` (its actions read already): "" when
// they are well formed, every step they name one of its actions; else what is wrong.
std::string ReadSwitches(const ordered_json& j, const KnownKeys& known, Plan* plan) {
  const size_t n = plan->actions.size();
  auto step = [&](const ordered_json& v, const std::string& where, size_t* out) {
    if (!v.is_number_unsigned()) return where + " names a step that is not a step number";
    size_t i = v.get<size_t>();
    if (i >= n)
      return where + " names step " + std::to_string(i + 1) + " of a plan of " + std::to_string(n);
    *out = i;
    return std::string();
  };
  std::string problem;
  for (const auto& g : j.at("groups")) {
    std::string where = "group " + std::to_string(plan->groups.size() + 1);
    if (!(problem = UnknownKeys(g, known.group, where)).empty()) return problem;
    ParallelGroup x;
    if (!(problem = step(g.at("first"), where, &x.first)).empty()) return problem;
    if (!(problem = step(g.at("last"), where, &x.last)).empty()) return problem;
    for (const auto& c : g.at("chains")) {
      Chain chain;
      if (!c.is_array() || c.size() != 3)
        return where + " has a chain that is not [start, gate, last]";
      if (!(problem = step(c.at(0), where, &chain.start)).empty()) return problem;
      if (!(problem = step(c.at(1), where, &chain.gate)).empty()) return problem;
      if (!(problem = step(c.at(2), where, &chain.last)).empty()) return problem;
      if (chain.start >= chain.gate || chain.gate > chain.last || chain.start < x.first ||
          chain.last > x.last)
        return where + " has a chain outside its steps";
      if (plan->actions[chain.gate].kind != ActionKind::kWaitHealthy)
        return where + " names step " + std::to_string(chain.gate + 1) +
               " as a health gate, which it is not";
      x.chains.push_back(chain);
    }
    plan->groups.push_back(std::move(x));
  }
  for (const auto& b : j.at("downloads")) {
    std::string where = "download batch " + std::to_string(plan->downloads.size() + 1);
    DownloadBatch x;
    if (!b.is_array() || b.size() != 2) return where + " is not [first, last]";
    if (!(problem = step(b.at(0), where, &x.first)).empty()) return problem;
    if (!(problem = step(b.at(1), where, &x.last)).empty()) return problem;
    bool downloads = x.first < x.last;
    for (size_t i = x.first; downloads && i <= x.last; ++i)
      downloads = plan->actions[i].kind == ActionKind::kDownload;
    if (!downloads) return where + " names steps that are not two or more downloads";
    plan->downloads.push_back(x);
  }
  for (const auto& s : j.at("switches")) {
    std::string where = "switch " + std::to_string(plan->switches.size() + 1);
    if (!(problem = UnknownKeys(s, known.switch_, where)).empty()) return problem;
    Switch sw;
    sw.address = s.at("address").get<std::string>();
    sw.unit = s.at("unit").get<std::string>();
    std::string mode = s.at("mode").get<std::string>();
    bool known_mode = false;
    for (SwitchMode m : kModes)
      if (mode == SwitchModeName(m)) {
        sw.mode = m;
        known_mode = true;
      }
    if (!known_mode)
      return where + " has the mode '" + mode.substr(0, 80) + "', which this berth does not know";
    for (const auto& v : s.at("steps"))
      if (!(problem = step(v, where, &sw.steps.emplace_back())).empty()) return problem;
    if (!(problem = step(s.at("start"), where, &sw.start)).empty()) return problem;
    for (const auto& v : s.at("gates"))
      if (!(problem = step(v, where, &sw.gates.emplace_back())).empty()) return problem;
    if (const auto& h = s.at("health_gate"); !h.is_null()) {
      if (!(problem = step(h, where, &sw.health_gate.emplace())).empty()) return problem;
      if (plan->actions[*sw.health_gate].kind != ActionKind::kWaitHealthy)
        return where + " names step " + std::to_string(*sw.health_gate + 1) +
               " as its health gate, which it is not";
    }
    for (const auto& r : s.at("replaces")) {
      if (!(problem = UnknownKeys(r, known.replaced, where + " replaces")).empty()) return problem;
      Replaced x;
      x.address = r.at("address").get<std::string>();
      x.unit = r.at("unit").get<std::string>();
      if (!(problem = step(r.at("stop_step"), where, &x.stop_step)).empty()) return problem;
      x.gate = GateFromJson(r.at("gate"), where + " replaces gate", &problem);
      if (!problem.empty()) return problem;
      // (A plan saved before standbys has none: nothing it replaces sleeps.)
      if (r.contains("asleep")) x.asleep = r.at("asleep").get<bool>();
      StepPayload wake;
      problem = StepFromJson(ActionKind::kWake, r.at("wake"), where + " replaces wake", &wake);
      if (!problem.empty()) return problem;
      x.wake = std::get<StandbyStep>(wake);
      sw.replaces.push_back(std::move(x));
    }
    sw.restores_unit = s.at("restores_unit").get<bool>();
    sw.needs_turn = s.at("needs_turn").get<bool>();
    sw.front_port = s.at("front_port").get<int>();
    sw.front_socket = s.at("front_socket").get<std::string>();
    sw.backend_port = s.at("backend_port").get<int>();
    sw.undo_route = s.at("undo_route").get<std::string>();
    sw.group = s.at("group").get<int>();
    if (sw.group < -1 || sw.group >= static_cast<int>(plan->groups.size()))
      return where + " names group " + std::to_string(sw.group) + ", which the plan does not have";
    plan->switches.push_back(std::move(sw));
  }
  return "";
}

}  // namespace

Result<SavedPlan> SavedPlanFromJson(const std::string& text, const std::string& source) {
  SavedPlan p;
  auto refuse = [&](const std::string& why) {
    return Status::InvalidArgument(source + " is not a saved plan berth carries out: " + why +
                                   "; make the plan again with `berth plan --out`");
  };
  try {
    std::string problem;
    auto j = ParseStrict(text, &problem);
    if (!problem.empty()) return refuse(problem);
    if (int old = j.is_object() ? j.value("format_version", 0) : 0;
        old >= 1 && old < SavedPlan::kFormatVersion)
      return Status::InvalidArgument(source + ": this plan was saved by an older berth (format " +
                                     std::to_string(old) +
                                     "); make it again with `berth plan --out`");
    if (!j.is_object() || j.value("format_version", 0) != SavedPlan::kFormatVersion)
      return Status::InvalidArgument(source + " is not a berth saved plan of format " +
                                     std::to_string(SavedPlan::kFormatVersion));
    const KnownKeys& known = Known();
    problem = UnknownKeys(j, known.top, "the plan");
    if (problem.empty()) problem = UnknownKeys(j.at("manifest"), known.manifest, "manifest");
    if (problem.empty()) problem = UnknownKeys(j.at("state"), known.state, "state");
    if (!problem.empty()) return refuse(problem);
    p.host = j.at("host").get<std::string>();
    p.created_unix = j.at("created_unix").get<int64_t>();
    p.manifest_path = j.at("manifest").at("path").get<std::string>();
    p.manifest_digest = j.at("manifest").at("digest").get<std::string>();
    p.state_lineage = j.at("state").at("lineage").get<std::string>();
    p.state_serial = j.at("state").at("serial").get<uint64_t>();
    const ordered_json& prints = j.at("fingerprints");
    if (!prints.is_object() || prints.empty())
      return refuse(
          "its fingerprints are empty: a plan carries a digest of everything it touches or "
          "depends on, which apply compares with the host");
    for (const auto& [address, digest] : prints.items()) {
      if (!IsDigest(digest))
        return refuse("fingerprints." + address.substr(0, 80) + " is not a sha256 digest");
      p.fingerprints[address] = digest.get<std::string>();
    }
    if (p.created_unix <= 0) return refuse("its created_unix is not a time");
    p.plan.host = p.host;
    size_t step = 0;
    for (const auto& a : j.at("actions")) {
      ++step;
      std::string where = "step " + std::to_string(step);
      problem = UnknownKeys(a, known.action, where);
      if (problem.empty())
        problem = UnknownKeys(a.at("requires"), known.resources, where + " requires");
      if (problem.empty()) problem = UnknownKeys(a.at("frees"), known.resources, where + " frees");
      if (!problem.empty()) return refuse(problem);
      Action x;
      std::string kind = a.at("kind").get<std::string>();
      bool known_kind = false;
      for (ActionKind k : kKinds)
        if (kind == ActionKindName(k)) {
          x.kind = k;
          known_kind = true;
        }
      if (!known_kind) return Status::InvalidArgument(source + ": unknown action '" + kind + "'");
      x.address = a.at("address").get<std::string>();
      std::string reason = a.at("reason").get<std::string>();
      bool known_reason = false;
      // Every reason this berth names ("?" past the last one).
      for (int r = 0; std::string_view(ReasonName(static_cast<Reason>(r))) != "?"; ++r)
        if (reason == ReasonName(static_cast<Reason>(r))) {
          x.reason = static_cast<Reason>(r);
          known_reason = true;
        }
      if (!known_reason)
        return refuse(where + " (" + kind + ") has the reason '" + reason.substr(0, 80) +
                      "', which this berth does not know");
      x.detail = a.value("detail", "");
      x.requires_ = ResourcesFromJson(a.at("requires"));
      x.frees = ResourcesFromJson(a.at("frees"));
      x.unit = a.at("unit").get<std::string>();
      x.takes_down = a.at("takes_down").get<bool>();
      problem = StepFromJson(x.kind, a.at("step"), where, &x.step);
      if (!problem.empty()) return refuse(problem);
      p.plan.actions.push_back(std::move(x));
    }
    problem = ReadSwitches(j, known, &p.plan);
    if (!problem.empty()) return refuse(problem);
  } catch (const std::exception& e) {
    return Status::InvalidArgument(source +
                                   " is not a readable saved plan: " + Excerpt(e.what(), 300));
  }
  return p;
}

namespace {

// What the executor acts on, field by field: two actions that agree here do the same thing.
std::vector<std::pair<std::string, std::string>> Effect(const Action& a) {
  std::vector<std::pair<std::string, std::string>> out = {
      {"kind", ActionKindName(a.kind)},
      {"address", a.address},
      {"unit", a.unit},
      {"taking a service down", a.takes_down ? "yes" : "no"}};
  // The payload's fields, in words a reviewer reads ("its environment is not ...").
  std::visit(
      [&](const auto& payload) {
        ForEachStepField(payload, [&](const auto& field, const auto& value) {
          if (field.key)
            out.emplace_back(field.words ? field.words : field.key,
                             DumpJson(ordered_json(value), -1));
        });
      },
      a.step);
  return out;
}

std::string Step(size_t i, const Action& a) {
  return "step " + std::to_string(i + 1) + " (" + ActionKindName(a.kind) + " " + a.address + ")";
}

}  // namespace

std::vector<std::string> PlanDifferences(const Plan& saved, const Plan& fresh) {
  std::vector<std::string> why;
  size_t n = std::min(saved.actions.size(), fresh.actions.size());
  for (size_t i = 0; i < n && why.size() < 5; ++i) {
    auto a = Effect(saved.actions[i]);
    auto b = Effect(fresh.actions[i]);
    for (size_t f = 0; f < a.size(); ++f) {
      if (f < b.size() && a[f] == b[f]) continue;
      why.push_back(Step(i, saved.actions[i]) + ": its " + a[f].first +
                    " is not what berth would do now (" + Step(i, fresh.actions[i]) + ")");
      break;
    }
  }
  for (size_t i = n; i < saved.actions.size() && why.size() < 5; ++i)
    why.push_back(Step(i, saved.actions[i]) + " is not in the plan berth makes now");
  for (size_t i = n; i < fresh.actions.size() && why.size() < 5; ++i)
    why.push_back(Step(i, fresh.actions[i]) + " is missing from the saved plan");
  // The switches and groups the executor runs (and undoes) as stated.
  if (why.empty() && SwitchesToJson(saved) != SwitchesToJson(fresh))
    why.push_back(
        "its switches (what each start replaces and how it is undone) are not what "
        "berth would do now");
  if (why.empty() && (GroupsToJson(saved) != GroupsToJson(fresh) ||
                      DownloadsToJson(saved) != DownloadsToJson(fresh)))
    why.push_back("its side-by-side starts are not what berth would do now");
  if (saved.blocked() != fresh.blocked())
    why.push_back(fresh.blocked() ? "the plan is blocked now" : "the saved plan was blocked");
  return why;
}

std::vector<std::string> StaleReasons(const SavedPlan& saved, const std::string& manifest_digest,
                                      const std::string& lineage, uint64_t serial,
                                      const Observed& now, int64_t now_unix, int64_t max_age_s) {
  std::vector<std::string> why;
  if (now.hostname != saved.host)
    why.push_back("it was made for host " + saved.host + ", this is " + now.hostname);
  if (manifest_digest != saved.manifest_digest)
    why.push_back("the manifest " + saved.manifest_path + " changed since");
  if (lineage != saved.state_lineage || serial != saved.state_serial)
    why.push_back("berth applied something else since (state serial " +
                  std::to_string(saved.state_serial) + " then, " + std::to_string(serial) +
                  " now)");
  // Seconds as text, a time from a file (any int64) capped so that it cannot overflow.
  auto seconds = [](int64_t s) {
    return FormatDurationMs(static_cast<uint64_t>(std::min<int64_t>(s, int64_t{1} << 40)) * 1000);
  };
  if (saved.created_unix > now_unix + kSavedPlanClockSkewS)
    why.push_back("it says it was made " + seconds(saved.created_unix - now_unix) +
                  " from now (more than the " + seconds(kSavedPlanClockSkewS) +
                  " two clocks may disagree): this host's clock or the file is wrong, and its "
                  "age cannot be known");
  else if (max_age_s > 0 && now_unix - saved.created_unix > max_age_s)
    why.push_back("it was made " + seconds(now_unix - saved.created_unix) +
                  " ago, and --max-age allows " + seconds(max_age_s));
  std::map<std::string, std::string> current = Fingerprint(saved.plan, now);
  for (const auto& [address, digest] : saved.fingerprints) {
    if (address == "host") continue;
    auto it = current.find(address);
    if (it == current.end() || it->second != digest) why.push_back(address + " changed since");
  }
  return why;
}

std::vector<std::string> MissingFingerprints(const SavedPlan& saved) {
  std::vector<std::string> why;
  // What it depends on follows from its actions alone (the addresses, not the digests).
  for (const auto& [address, digest] : Fingerprint(saved.plan, Observed{}))
    if (!saved.fingerprints.count(address))
      why.push_back("it carries no fingerprint of " + address.substr(0, 200) +
                    ", which its actions depend on: apply cannot tell whether it changed since");
  return why;
}

}  // namespace berth
