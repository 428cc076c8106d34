// `fleet:`: the etcd that coordinates this host with the others of its fleet, how many may be
// dark at once, and the waves of a rollout. Checked here as far as one file allows.
#include <map>
#include <string>
#include <utility>

#include "manifests/decode_fleet.h"

namespace berth::manifests {
namespace {

constexpr std::string_view kFleetKeys[] = {"name", "etcd",  "max_unavailable", "lease_ttl",
                                           "wait", "waves", "prefix"};
constexpr std::string_view kEtcdKeys[] = {"endpoints", "ca_file",       "cert_file", "key_file",
                                          "username",  "password_file", "timeout"};
constexpr std::string_view kWaveKeys[] = {"name", "hosts"};

// A fleet or wave name: it becomes part of etcd keys and of what `berth fleet status` prints.
bool IsFleetName(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (!alnum && (i == 0 || (c != '-' && c != '_' && c != '.'))) return false;
  }
  return true;
}

bool Printable(const std::string& s) {
  for (unsigned char c : s)
    if (c < 0x20 || c == 0x7f) return false;
  return true;
}

// http://host:port, https://host:port or unix:///absolute/path: what the etcd client accepts.
std::string EndpointProblem(const std::string& e) {
  if (!Printable(e) || e.find(' ') != std::string::npos) return "it holds a space or control byte";
  if (e.starts_with("unix://")) {
    if (e.size() <= 7 || e[7] != '/') return "a unix socket needs an absolute path: unix:///path";
    return "";
  }
  std::string_view rest;
  if (e.starts_with("http://"))
    rest = std::string_view(e).substr(7);
  else if (e.starts_with("https://"))
    rest = std::string_view(e).substr(8);
  else
    return "use http://HOST:PORT, https://HOST:PORT or unix:///PATH";
  if (rest.empty() || rest.front() == '/' || rest.front() == ':') return "it names no host";
  return "";
}

void DecodeEtcd(YamlReader& r, const Field& etcd, FleetSpec* fleet) {
  if (!r.ExpectMap(etcd)) return;
  bool has_endpoints = false;
  SourceLoc cert_loc, key_loc, user_loc, password_loc;
  for (const Field& f : r.Entries(etcd.value, kEtcdKeys, "in etcd")) {
    if (f.key == "endpoints") {
      has_endpoints = true;
      auto v = r.StringList(f, true);
      if (!v) continue;
      if (v->empty()) r.Error(f.value_loc, "'endpoints' is empty", "name at least one etcd");
      for (const std::string& e : *v) {
        if (std::string why = EndpointProblem(e); !why.empty())
          r.Error(f.value_loc, "bad etcd endpoint '" + e + "': " + why);
        else
          fleet->endpoints.push_back(e);
      }
    } else if (f.key == "timeout") {
      if (auto v = r.DurationMs(f)) {
        if (*v < 100 || *v > 600000)
          r.Error(f.value_loc, "'timeout' must be between 100ms and 10m");
        else
          fleet->request_timeout_ms = *v;
      }
    } else if (f.key == "username") {
      user_loc = f.key_loc;
      if (auto v = r.String(f); v && !v->empty() && Printable(*v))
        fleet->username = *v;
      else if (v)
        r.Error(f.value_loc, "'username' must be a non-empty line of text");
    } else if (auto v = r.AbsolutePath(f)) {  // ca_file, cert_file, key_file, password_file
      if (f.key == "ca_file") fleet->ca_file = *v;
      if (f.key == "cert_file") (fleet->cert_file = *v, cert_loc = f.key_loc);
      if (f.key == "key_file") (fleet->key_file = *v, key_loc = f.key_loc);
      if (f.key == "password_file") (fleet->password_file = *v, password_loc = f.key_loc);
    }
  }
  if (!has_endpoints)
    r.Error(etcd.key_loc, "etcd needs 'endpoints'", "e.g. endpoints: [\"https://etcd-1:2379\"]");
  if (fleet->cert_file.empty() != fleet->key_file.empty())
    r.Error(fleet->cert_file.empty() ? key_loc : cert_loc,
            "a client certificate needs both cert_file and key_file");
  if (fleet->username.empty() != fleet->password_file.empty())
    r.Error(fleet->username.empty() ? password_loc : user_loc,
            "etcd auth needs both username and password_file",
            "the password is read from the file, never written in the manifest");
}

void DecodeWaves(YamlReader& r, const Field& waves, FleetSpec* fleet) {
  if (!waves.value.IsSequence()) {
    r.Error(waves.value_loc,
            "expected a list for 'waves', got " + YamlReader::Describe(waves.value),
            "e.g. waves: [{name: canary, hosts: [gpu-01]}, {name: rest, hosts: [\"*\"]}]");
    return;
  }
  std::map<std::string, SourceLoc> seen;
  for (const YamlNode item : waves.value) {
    SourceLoc loc = r.Loc(item);
    Field entry{"waves", loc, loc, item};
    if (!r.ExpectMap(entry)) continue;
    FleetWave wave;
    wave.loc = loc;
    bool has_hosts = false;
    for (const Field& f : r.Entries(item, kWaveKeys, "in a wave")) {
      if (f.key == "name") {
        auto v = r.String(f);
        if (v && !IsFleetName(*v)) {
          r.Error(f.value_loc, "bad wave name '" + *v + "'",
                  "use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit");
        } else if (v) {
          wave.name = *v;
          auto [it, inserted] = seen.emplace(*v, f.value_loc);
          if (!inserted)
            r.Error(f.value_loc,
                    "wave '" + *v + "' is listed twice, first at " + it->second.ToString());
        }
      } else if (auto v = r.StringList(f, true)) {
        has_hosts = true;
        if (v->empty()) r.Error(f.value_loc, "'hosts' is empty", "name at least one host glob");
        for (const std::string& h : *v) {
          if (h.empty() || !Printable(h))
            r.Error(f.value_loc, "a host glob must be a non-empty line of text");
          else
            wave.hosts.push_back(h);
        }
      }
    }
    if (wave.name.empty()) r.Error(loc, "a wave needs 'name'");
    if (!has_hosts) r.Error(loc, "a wave needs 'hosts'", "e.g. hosts: [\"gpu-0*\"]");
    fleet->waves.push_back(std::move(wave));
  }
}

}  // namespace

void DecodeFleet(YamlReader& r, const Field& field, FleetSpec* fleet) {
  fleet->loc = field.key_loc;
  if (!r.ExpectMap(field)) return;
  bool has_name = false, has_etcd = false;
  for (const Field& f : r.Entries(field.value, kFleetKeys, "in fleet")) {
    if (f.key == "name") {
      has_name = true;
      auto v = r.String(f);
      if (v && IsFleetName(*v))
        fleet->name = *v;
      else if (v)
        r.Error(f.value_loc, "bad fleet name '" + *v + "'",
                "use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit");
    } else if (f.key == "etcd") {
      has_etcd = true;
      DecodeEtcd(r, f, fleet);
    } else if (f.key == "max_unavailable") {
      if (auto v = r.Int(f, 1, 10000)) fleet->max_unavailable = static_cast<int>(*v);
    } else if (f.key == "lease_ttl") {
      if (auto v = r.DurationMs(f)) {
        if (*v < 2000 || *v > 3600000)
          r.Error(f.value_loc, "'lease_ttl' must be between 2s and 1h",
                  "a host killed mid-switch holds its slot this long");
        else
          fleet->lease_ttl_ms = *v;
      }
    } else if (f.key == "wait") {
      if (auto v = r.DurationMs(f)) fleet->wait_ms = *v;
    } else if (f.key == "prefix") {
      auto v = r.String(f);
      if (v && (!v->starts_with("/") || !v->ends_with("/") || !Printable(*v)))
        r.Error(f.value_loc, "bad prefix '" + *v + "'",
                "it starts and ends with '/': /berth/fleets/");
      else if (v)
        fleet->prefix = *v;
    } else if (f.key == "waves") {
      DecodeWaves(r, f, fleet);
    }
  }
  if (!has_name) r.Error(field.key_loc, "fleet needs 'name'", "e.g. name: prod-llm");
  if (!has_etcd)
    r.Error(field.key_loc, "fleet needs 'etcd'",
            "e.g. etcd: {endpoints: [\"https://etcd-1:2379\"]}");
  // An unusable fleet must not leave a half-filled spec that looks enabled.
  if (!has_name || !has_etcd) fleet->name.clear();
}

}  // namespace berth::manifests
