#include "planners/unit_diff.h"

#include <algorithm>
#include <set>
#include <string_view>
#include <vector>

#include "core/hash.h"
#include "core/hf_cache.h"
#include "core/unit_marker.h"
#include "planners/unit_syntax.h"

namespace berth {
namespace {

// [Unit] settings only systemd reads: what a unit is called, its start limit, what runs when it
// fails, how a job for it behaves (NixOS's unit_section_ignores, and the StartLimit* keys).
const std::set<std::string> kUnitReloadKeys = {"Description",
                                               "Documentation",
                                               "StartLimitIntervalSec",
                                               "StartLimitInterval",
                                               "StartLimitBurst",
                                               "StartLimitAction",
                                               "OnFailure",
                                               "OnSuccess",
                                               "OnFailureJobMode",
                                               "OnSuccessJobMode",
                                               "IgnoreOnIsolate",
                                               "StopWhenUnneeded",
                                               "RefuseManualStart",
                                               "RefuseManualStop",
                                               "AllowIsolate",
                                               "CollectMode",
                                               "SourcePath",
                                               "JobTimeoutSec",
                                               "JobRunningTimeoutSec",
                                               "JobTimeoutAction",
                                               "FailureAction",
                                               "SuccessAction",
                                               "RebootArgument"};

// [Service] settings systemd applies when the process exits or must stop, never inside it: the
// restart policy, the timeouts, how it is killed. WatchdogSec= is not among them: the process
// reads WATCHDOG_USEC when it starts, and a shorter watchdog would kill one that pings at the old
// pace.
const std::set<std::string> kServiceReloadKeys = {"Restart",
                                                  "RestartSec",
                                                  "RestartSteps",
                                                  "RestartMaxDelaySec",
                                                  "RestartPreventExitStatus",
                                                  "RestartForceExitStatus",
                                                  "SuccessExitStatus",
                                                  "TimeoutSec",
                                                  "TimeoutStartSec",
                                                  "TimeoutStopSec",
                                                  "TimeoutAbortSec",
                                                  "TimeoutStartFailureMode",
                                                  "TimeoutStopFailureMode",
                                                  "RuntimeMaxSec",
                                                  "RuntimeRandomizedExtraSec",
                                                  "StartLimitIntervalSec",
                                                  "StartLimitInterval",
                                                  "StartLimitBurst",
                                                  "StartLimitAction",
                                                  "KillMode",
                                                  "KillSignal",
                                                  "RestartKillSignal",
                                                  "FinalKillSignal",
                                                  "SendSIGKILL",
                                                  "SendSIGHUP"};

// An Environment= line that only says where vLLM keeps its caches (VLLM_CACHE_ROOT, which
// berth renders for every vLLM service): the running server keeps the folder it opened, the next
// start uses the new one, so a change of it alone needs no restart (a berth that begins to render
// it restarts no server). Its own key, so that KeyEffect can say so.
constexpr const char* kCacheRootKey = "Service.Environment VLLM_CACHE_ROOT";

bool IsCacheRoot(const std::pair<std::string, std::string>& e) {
  if (e.first != "Service.Environment") return false;
  std::string_view v = e.second;
  if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
  // One assignment alone on the line, as berth writes it.
  return v.starts_with("VLLM_CACHE_ROOT=") && v.find_first_of(" \t\"'") == std::string_view::npos;
}

// The unit's entries with each cache-root assignment under its own key.
UnitEntries EntriesOf(const std::string& content) {
  UnitEntries entries = ParseUnitEntries(content);
  for (auto& e : entries)
    if (IsCacheRoot(e)) e.first = kCacheRootKey;
  return entries;
}

std::string KeyName(const std::string& section_key) {
  return section_key.substr(section_key.find('.') + 1);
}

// "--port 8000 → 8001, +--enable-expert-parallel" from two argv.
std::string DiffArgv(const std::vector<std::string>& a, const std::vector<std::string>& b,
                     bool* only_model_path) {
  auto flags = [](const std::vector<std::string>& v) {
    std::vector<std::pair<std::string, std::string>> f;  // flag -> value ("" for switches)
    std::vector<std::string> positional;
    for (size_t i = 0; i < v.size(); ++i) {
      if (v[i].starts_with("--")) {
        std::string val;
        if (i + 1 < v.size() && !v[i + 1].starts_with("--")) val = v[++i];
        f.emplace_back(v[i - (val.empty() ? 0 : 1)], val);
      } else {
        positional.push_back(v[i]);
      }
    }
    return std::make_pair(f, positional);
  };
  auto [fa, pa] = flags(a);
  auto [fb, pb] = flags(b);
  std::vector<std::string> changes;
  *only_model_path = true;
  if (pa != pb) {
    bool path_only = pa.size() == pb.size();
    for (size_t i = 0; path_only && i < pa.size(); ++i)
      if (pa[i] != pb[i] && !IsSnapshotPath(pa[i])) path_only = false;
    if (path_only) {
      for (size_t i = 0; i < pa.size(); ++i)
        if (pa[i] != pb[i]) changes.push_back("model " + pa[i] + " → " + pb[i]);
    } else {
      *only_model_path = false;
      std::string old_s, new_s;
      for (const auto& p : pa) {
        if (!old_s.empty()) old_s += ' ';
        old_s += p;
      }
      for (const auto& p : pb) {
        if (!new_s.empty()) new_s += ' ';
        new_s += p;
      }
      changes.push_back("command " + old_s + " → " + new_s);
    }
  }
  auto find = [](const auto& v, const std::string& k) -> const std::string* {
    for (const auto& [fk, fv] : v)
      if (fk == k) return &fv;
    return nullptr;
  };
  for (const auto& [k, v] : fb) {
    const std::string* old = find(fa, k);
    if (!old) {
      changes.push_back("+" + k + (v.empty() ? "" : " " + v));
      *only_model_path = false;
    } else if (*old != v) {
      changes.push_back(k + " " + *old + " → " + v);
      *only_model_path = false;
    }
  }
  for (const auto& [k, v] : fa)
    if (!find(fb, k)) {
      changes.push_back("-" + k + (v.empty() ? "" : " " + v));
      *only_model_path = false;
    }
  std::string out;
  for (const auto& c : changes) out += (out.empty() ? "" : ", ") + c;
  return out;
}

}  // namespace

UnitKeyEffect KeyEffect(const std::string& section_key) {
  if (section_key == kCacheRootKey) return UnitKeyEffect::kReload;
  size_t dot = section_key.find('.');
  if (dot == std::string::npos) return UnitKeyEffect::kRestart;
  std::string section = section_key.substr(0, dot), key = section_key.substr(dot + 1);
  // [Install] is read by systemctl enable alone; systemd ignores keys that start with X-.
  if (section == "Install" || key.starts_with("X-")) return UnitKeyEffect::kReload;
  if (section == "Unit" && kUnitReloadKeys.count(key)) return UnitKeyEffect::kReload;
  if (section == "Service" && kServiceReloadKeys.count(key)) return UnitKeyEffect::kReload;
  return UnitKeyEffect::kRestart;
}

std::string RestartDigest(const std::string& content) {
  UnitEntries entries;
  for (auto& e : EntriesOf(UnitBody(content)))
    if (KeyEffect(e.first) == UnitKeyEffect::kRestart) entries.push_back(std::move(e));
  // By key, each key's values in file order: moving a line does not change what runs.
  std::stable_sort(entries.begin(), entries.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::string text;
  for (const auto& [k, v] : entries) text += k + "=" + v + "\n";
  return "restart-keys:" + Sha256Hex(text);
}

UnitDiff DiffUnits(const std::string& old_content, const std::string& new_content) {
  UnitDiff d;
  UnitEntries a = EntriesOf(old_content), b = EntriesOf(new_content);
  if (UnitBody(old_content) != UnitBody(new_content)) d.changed = true;
  std::vector<std::string> parts;
  bool model_path_only = true;
  auto values = [](const UnitEntries& e, const std::string& key) {
    std::vector<std::string> v;
    for (const auto& [k, val] : e)
      if (k == key) v.push_back(val);
    return v;
  };
  std::vector<std::string> keys;
  for (const auto* e : {&a, &b})
    for (const auto& [k, v] : *e)
      if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
  for (const auto& key : keys) {
    auto va = values(a, key), vb = values(b, key);
    if (va == vb) continue;
    d.changed = true;
    if (key.starts_with("Install.")) d.install_changed = true;
    const bool reload_only = KeyEffect(key) == UnitKeyEffect::kReload;
    if (reload_only) {
      d.reload_keys.push_back(KeyName(key));
      if (key == "Unit.Description" || key == "Unit.Documentation") {
        parts.push_back(KeyName(key) + " changed");
        continue;
      }
    } else {
      d.needs_restart = true;
      d.restart_keys.push_back(KeyName(key));
    }
    if (key == "Service.ExecStart" && va.size() == 1 && vb.size() == 1) {
      bool only_path = false;
      parts.push_back("ExecStart changed: " +
                      DiffArgv(SplitExecLine(va[0]), SplitExecLine(vb[0]), &only_path));
      model_path_only = model_path_only && only_path;
      continue;
    }
    if (!reload_only) model_path_only = false;
    std::string name = KeyName(key);
    if (key == "Service.Environment") {
      std::vector<std::string> env;
      for (const auto& v : vb)
        if (std::find(va.begin(), va.end(), v) == va.end()) env.push_back("+" + v);
      for (const auto& v : va)
        if (std::find(vb.begin(), vb.end(), v) == vb.end()) env.push_back("-" + v);
      std::string joined;
      for (const auto& e : env) joined += (joined.empty() ? "" : ", ") + e;
      parts.push_back("Environment changed: " + joined);
    } else {
      auto join = [](const std::vector<std::string>& v) {
        std::string s;
        for (const auto& x : v) {
          if (!s.empty()) s += ' ';
          s += x;
        }
        return s.empty() ? std::string("(unset)") : s;
      };
      parts.push_back(name + " changed: " + join(va) + " → " + join(vb));
    }
  }
  d.only_model_path = d.needs_restart && model_path_only;
  for (const auto& p : parts) d.detail += (d.detail.empty() ? "" : "; ") + p;
  if (d.changed && d.detail.empty()) d.detail = "comments or layout changed";
  return d;
}

}  // namespace berth
