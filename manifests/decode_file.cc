// The top level of a file, `host:` and `models:`. Services are in decode_service.cc.
#include <cctype>
#include <exception>
#include <utility>

#include "core/front.h"
#include "manifests/decode.h"
#include "manifests/decode_fleet.h"
#include "manifests/decode_service.h"
#include "manifests/names.h"
#include "manifests/yaml_parse.h"
#include "manifests/yaml_reader.h"

namespace berth::manifests {
namespace {

constexpr std::string_view kTopKeys[] = {"berth", "host", "fleet", "models", "services", "fronts"};
constexpr std::string_view kHostKeys[] = {"match",          "store",       "reserve",
                                          "unit_dir",       "executables", "gpus",
                                          "keep_revisions", "front_dir",   "prewarm"};
constexpr std::string_view kFrontKeys[] = {"bind",        "hold",  "drain",
                                           "retry_after", "ready", "route"};
constexpr std::string_view kReadyKeys[] = {"path", "lead"};
constexpr std::string_view kGpuInventoryKeys[] = {"count", "memory"};
constexpr std::string_view kMatchKeys[] = {"hostname"};
constexpr std::string_view kExecutableEngines[] = {"vllm",         "sglang",  "llama-server",
                                                   "trtllm-serve", "haproxy", "berth"};
constexpr std::string_view kModelKeys[] = {"source",  "revision", "include",
                                           "exclude", "keep",     "size"};

void DecodeHost(YamlReader& r, const Field& host, FilePart* part) {
  part->has_host = true;
  part->host.loc = host.key_loc;
  if (!r.ExpectMap(host)) return;
  for (const Field& f : r.Entries(host.value, kHostKeys, "in host")) {
    if (f.key == "match") {
      if (!r.ExpectMap(f)) continue;
      for (const Field& m : r.Entries(f.value, kMatchKeys, "in match")) {
        std::optional<std::string> glob = r.String(m);
        if (glob && glob->empty()) r.Error(m.value_loc, "'hostname' must not be empty");
        if (glob && !glob->empty()) part->host.match[m.key] = *glob;
      }
    } else if (f.key == "store") {
      if (auto v = r.AbsolutePath(f); v && r.UnitValue(f.value_loc, f.key, *v))
        part->host.store = *v;
    } else if (f.key == "reserve") {
      if (auto v = r.Size(f)) part->host.reserve_bytes = *v;
    } else if (f.key == "keep_revisions") {
      if (auto v = r.Int(f, 0, 100)) part->host.keep_revisions = static_cast<int>(*v);
    } else if (f.key == "prewarm") {
      if (auto v = r.Bool(f)) part->host.prewarm = *v;
    } else if (f.key == "unit_dir") {
      if (auto v = r.AbsolutePath(f)) part->host.unit_dir = *v;
    } else if (f.key == "front_dir") {
      // Its socket paths (<dir>/<port>.master) must fit a unix socket's 108 bytes.
      if (auto v = r.AbsolutePath(f); v && r.UnitValue(f.value_loc, f.key, *v)) {
        if (v->size() > 80)
          r.Error(f.value_loc, "'front_dir' is " + std::to_string(v->size()) + " bytes long",
                  "use a path of at most 80 bytes: the fronts' unix sockets live there");
        else
          part->host.front_dir = *v;
      }
    } else if (f.key == "gpus") {
      if (!r.ExpectMap(f)) continue;
      GpuInventory inv;
      bool count = false, memory = false;
      for (const Field& g : r.Entries(f.value, kGpuInventoryKeys, "in gpus")) {
        if (g.key == "count") {
          if (auto v = r.Int(g, 1, 1024)) {
            inv.count = static_cast<int>(*v);
            count = true;
          }
        } else if (auto v = r.Size(g)) {
          inv.memory_bytes = *v;
          memory = true;
        }
      }
      if (count && memory)
        part->host.gpus = inv;
      else
        r.Error(f.key_loc, "'gpus' needs both count and memory, e.g. {count: 8, memory: 96GiB}");
    } else if (f.key == "executables") {
      if (!r.ExpectMap(f)) continue;
      for (const Field& e : r.Entries(f.value, kExecutableEngines, "in executables")) {
        if (auto v = r.AbsolutePath(e); v && r.UnitValue(e.value_loc, e.key, *v))
          part->executables[e.key] = *v;
      }
    }
  }
}

void DecodeModel(YamlReader& r, const Field& entry, FilePart* part) {
  ModelSpec model;
  model.name = entry.key;
  model.loc = entry.key_loc;
  if (std::string problem = ModelNameProblem(entry.key); !problem.empty()) {
    r.Error(entry.key_loc, "'" + entry.key + "' is not a valid model name: " + problem,
            "use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit");
  }
  if (r.ExpectMap(entry)) {
    bool has_source = false;
    const std::string where = "in model '" + entry.key + "'";
    for (const Field& f : r.Entries(entry.value, kModelKeys, where)) {
      if (f.key == "source") {
        has_source = true;
        std::optional<std::string> source = r.String(f);
        if (!source) continue;
        if (auto repo = ParseHfSource(*source)) {
          model.repo_id = *repo;
        } else {
          r.Error(f.value_loc, "bad source '" + *source + "'",
                  "use hf://org/name, e.g. hf://MiniMaxAI/MiniMax-M2.5");
        }
      } else if (f.key == "revision") {
        // Numbers are revisions too (a tag "2024", a commit of digits): take them as written.
        ScalarKind kind = f.value.IsScalar() ? YamlReader::KindOf(f.value) : ScalarKind::kNull;
        if (kind != ScalarKind::kString && kind != ScalarKind::kInt && kind != ScalarKind::kFloat) {
          r.String(f);  // reports the type error
          continue;
        }
        if (IsRevision(f.value.Scalar())) {
          model.revision = f.value.Scalar();
        } else {
          r.Error(f.value_loc, "bad revision '" + f.value.Scalar() + "'",
                  "use a branch, a tag or a 40-hex commit");
        }
      } else if (f.key == "include") {
        if (auto v = r.StringList(f, true)) model.include = *v;
      } else if (f.key == "exclude") {
        if (auto v = r.StringList(f, true)) model.exclude = *v;
      } else if (f.key == "keep") {
        if (auto v = r.Bool(f)) model.keep = *v;
      } else if (f.key == "size") {
        if (auto v = r.Size(f)) model.size_hint = *v;
      }
    }
    if (!has_source) {
      r.Error(entry.key_loc, "model '" + entry.key + "' needs 'source'",
              "e.g. source: hf://MiniMaxAI/MiniMax-M2.5");
    }
  }
  part->models.push_back(std::move(model));
}

// `fronts: {8000: {hold: 10m, drain: 2m, ready: {path: /ready, lead: 30s}}}`.
void DecodeFronts(YamlReader& r, const Field& fronts, FilePart* part) {
  if (!r.ExpectMap(fronts)) return;
  for (const Field& entry : r.NamedEntries(fronts.value, "in fronts", "front")) {
    FrontDecl front;
    front.loc = entry.key_loc;
    int port = 0;
    for (char c : entry.key)
      port = std::isdigit(static_cast<unsigned char>(c)) && port < 100000 ? port * 10 + (c - '0')
                                                                          : 100000;
    if (entry.key.empty() || port < 1 || port > 65535) {
      r.Error(entry.key_loc, "'" + entry.key + "' is not a port",
              "fronts are keyed by the public port they hold, e.g. fronts: {8000: {hold: 10m}}");
      continue;
    }
    front.port = port;
    if (!entry.value.IsNull() && r.ExpectMap(entry)) {
      for (const Field& f : r.Entries(entry.value, kFrontKeys, "in front " + entry.key)) {
        if (f.key == "bind") {
          std::optional<std::string> v = r.String(f);
          if (v && v->empty()) r.Error(f.value_loc, "'bind' must not be empty");
          if (v && !v->empty() && !IsFrontBindAddress(*v))
            r.Error(f.value_loc,
                    "front bind '" + v->substr(0, 80) +
                        "' is not one IPv4 or IPv6 address or host name",
                    "bind: 0.0.0.0 (every IPv4 address), ::, 127.0.0.1 or a host name; the port is "
                    "the front's key, never part of bind");
          else if (v && !v->empty() && r.UnitValue(f.value_loc, f.key, *v))
            front.bind = *v;
        } else if (f.key == "hold") {
          if (auto v = r.DurationMs(f)) front.hold_ms = *v;
        } else if (f.key == "drain") {
          if (auto v = r.DurationMs(f)) front.drain_ms = *v;
        } else if (f.key == "retry_after") {
          if (auto v = r.DurationMs(f)) front.retry_after_ms = *v;
        } else if (f.key == "route") {
          std::optional<std::string> v = r.String(f);
          if (v && *v == "model")
            front.route_by_model = true;
          else if (v)
            r.Error(f.value_loc,
                    "a front routes by 'model' or not at all, not '" + v->substr(0, 80) + "'",
                    "route: model (several services on one port, routed by the request's model), "
                    "or remove route (one service at a time, switched by berth)");
        } else if (f.key == "ready") {
          if (!r.ExpectMap(f)) continue;
          bool has_path = false;
          for (const Field& g : r.Entries(f.value, kReadyKeys, "in ready")) {
            if (g.key == "path") {
              std::optional<std::string> v = r.String(g);
              if (!v) continue;
              has_path = true;
              bool ok = v->size() > 1 && v->size() <= 200 && (*v)[0] == '/';
              for (char c : *v)
                ok = ok && (std::isalnum(static_cast<unsigned char>(c)) ||
                            std::string_view("/-_.").find(c) != std::string::npos);
              if (ok)
                front.ready_path = *v;
              else
                r.Error(g.value_loc, "bad ready path '" + *v + "'",
                        "a path of letters, digits, '/', '-', '_' and '.', starting with '/', "
                        "e.g. /berth/ready");
            } else if (auto v = r.DurationMs(g)) {
              front.ready_lead_ms = *v;
            }
          }
          if (!has_path) r.Error(f.key_loc, "'ready' needs 'path'", "e.g. ready: {path: /ready}");
        }
      }
    }
    part->fronts.push_back(std::move(front));
  }
}

void DecodeRoot(YamlReader& r, const YamlNode& root, FilePart* part) {
  const SourceLoc file_start{r.file(), 1, 1};
  if (root.IsNull()) {
    r.Error(file_start, "missing 'berth: 1'", "every manifest file starts with berth: 1");
    return;
  }
  if (!root.IsMap()) {
    r.Error(r.Loc(root), "expected a map at the top level, got " + YamlReader::Describe(root),
            "a manifest maps berth, host, fleet, models and services");
    return;
  }
  bool has_version = false;
  for (const Field& f : r.Entries(root, kTopKeys, "at the top level")) {
    if (f.key == "berth") {
      has_version = true;
      std::optional<int64_t> version = r.Int(f, INT64_MIN, INT64_MAX);
      if (version && *version != 1) {
        r.Error(f.value_loc, "unsupported berth version " + std::to_string(*version),
                "this berth reads version 1");
      }
    } else if (f.key == "host") {
      DecodeHost(r, f, part);
    } else if (f.key == "fleet") {
      part->has_fleet = true;
      DecodeFleet(r, f, &part->fleet);
    } else if (f.key == "models") {
      if (!r.ExpectMap(f)) continue;
      for (const Field& m : r.NamedEntries(f.value, "in models", "model")) {
        DecodeModel(r, m, part);
      }
    } else if (f.key == "fronts") {
      DecodeFronts(r, f, part);
    } else if (f.key == "services") {
      if (!r.ExpectMap(f)) continue;
      const std::vector<Field> entries = r.NamedEntries(f.value, "in services", "service");
      part->services.reserve(part->services.size() + entries.size());
      for (const Field& s : entries) part->services.push_back(DecodeService(r, s));
    }
  }
  if (!has_version) {
    r.Error(file_start, "missing 'berth: 1'", "every manifest file starts with berth: 1");
  }
}

}  // namespace

FilePart DecodeFile(const std::string& file, const std::string& text,
                    std::vector<Diagnostic>* diagnostics) {
  FilePart part;
  part.file = file;
  YamlReader r(file, diagnostics);
  std::optional<YamlDocument> doc = ParseDocument(r, text);
  if (!doc) return part;
  try {
    DecodeRoot(r, doc->root(), &part);
  } catch (const std::exception& e) {
    // Reads go through YamlReader, which does not throw; this is a last line of defence.
    r.Error(SourceLoc{file, 0, 0}, std::string("cannot read YAML: ") + e.what());
  }
  return part;
}

}  // namespace berth::manifests
