// ObservedFromJson (core/observed_json.h): every object's keys checked, every value's type and
// range, the first problem reported with its path ("store.repos[0].revisions[1].commit").
#include <charconv>
#include <limits>
#include <nlohmann/json.hpp>
#include <type_traits>

#include "core/json_scan.h"
#include "core/json_text.h"
#include "core/observed_json.h"
#include "core/observed_json_members.h"
#include "core/unit_marker.h"
#include "core/untrusted_text.h"

namespace berth {
namespace {

// What the reader parses into: objects as std::map, so that an object of many keys (the
// state's models, started, learned, start_times_ms, stop_times_ms: one per unit or repo) is read in
// n log n, not n² as ordered_json's linear key search makes it. Keys() therefore names the
// first unknown key in key order, not file order.
using InJson = nlohmann::json;

// Reads one object with a fixed key set; reports the first unknown or mistyped key with its path.
// Reading moves strings out of the document (each key is read once).
class Reader {
 public:
  Reader(InJson& j, std::string path) : j_(j), path_(std::move(path)) {}

  Status Keys(std::initializer_list<std::string_view> allowed) const {
    return Keys(std::vector<std::string_view>(allowed));
  }
  Status Keys(const std::vector<std::string_view>& allowed) const {
    if (!j_.is_object()) return Status::InvalidArgument(path_ + ": expected an object");
    for (auto it = j_.begin(); it != j_.end(); ++it) {
      bool found = false;
      for (std::string_view a : allowed) found = found || it.key() == a;
      if (!found) return Status::InvalidArgument(path_ + ": unknown key '" + it.key() + "'");
    }
    return Status::Ok();
  }
  template <typename T>
  Status Get(const char* key, T* out) const {
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) return Status::Ok();
    try {
      // A string is moved out of the document, which is read once and then dropped: the
      // units' texts are most of an observation's bytes.
      if constexpr (std::is_same_v<T, std::string>) {
        if (it->is_string()) {
          *out = std::move(it->template get_ref<std::string&>());
          return Status::Ok();
        }
      }
      // An integer field takes an integer in its range, nothing nlohmann would convert (a
      // float truncated, a boolean as 0 or 1, a value wrapped into the type).
      if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
        if (!it->is_number_integer()) throw nlohmann::json::type_error::create(302, "", nullptr);
        bool fits = it->is_number_unsigned()
                        ? it->template get<uint64_t>() <= uint64_t{std::numeric_limits<T>::max()}
                        : std::is_signed_v<T> &&
                              it->template get<int64_t>() >= int64_t{std::numeric_limits<T>::min()};
        if (!fits)
          return Status::InvalidArgument(path_ + "." + key + ": " + it->dump() +
                                         " is out of range");
      }
      *out = it->template get<T>();
    } catch (const nlohmann::json::exception&) {
      return Status::InvalidArgument(path_ + "." + key + ": wrong type (" +
                                     std::string(it->type_name()) + ")");
    }
    return Status::Ok();
  }
  // The keys of `members` and `more` only; each of `members` read into x.
  template <class T, class List>
  Status Members(T* x, const List& members, std::vector<std::string_view> more = {}) const {
    ForEachMember(*x, members, [&](std::string_view key, auto&) { more.push_back(key); });
    Status s = Keys(more);
    ForEachMember(*x, members, [&](std::string_view key, auto& value) {
      if (s.ok()) s = Get(std::string(key).c_str(), &value);
    });
    return s;
  }
  InJson* Child(const char* key) const {
    auto it = j_.find(key);
    return it == j_.end() || it->is_null() ? nullptr : &*it;
  }
  const std::string& path() const { return path_; }

 private:
  InJson& j_;
  std::string path_;
};

Status ExpectArray(InJson* j, const std::string& path) {
  if (j && !j->is_array()) return Status::InvalidArgument(path + ": expected an array");
  return Status::Ok();
}

// A GGUF file's figures (GgufModel), as the store scan read them: its lists hold at most
// kMaxGgufBlocks entries and block_bytes one per block, as ParseGgufModel makes them.
Status ReadGgufModel(InJson& j, const std::string& path, GgufModel* m) {
  for (const char* list : {"head_count_kv", "block_bytes"}) {
    InJson* v = Reader(j, path).Child(list);
    if (!v) continue;
    if (!v->is_array() || v->size() > kMaxGgufBlocks)
      return Status::InvalidArgument(path + "." + list + ": expected an array of at most " +
                                     std::to_string(kMaxGgufBlocks) + " numbers");
    for (const InJson& x : *v)
      if (!x.is_number_unsigned())
        return Status::InvalidArgument(path + "." + list + ": expected whole numbers >= 0");
  }
  BERTH_RETURN_IF_ERROR(Reader(j, path).Members(m, kGgufModelJson));
  if (m->problem.empty() && m->block_bytes.size() != m->block_count)
    return Status::InvalidArgument(path + ".block_bytes: " + std::to_string(m->block_bytes.size()) +
                                   " entries for " + std::to_string(m->block_count) + " blocks");
  return Status::Ok();
}

Status ReadRevision(InJson& j, const std::string& path, ObservedRevision* r) {
  Reader rd(j, path);
  BERTH_RETURN_IF_ERROR(rd.Members(
      r, kRevisionJson, {"bytes_total", "config", "weights_bytes", "gguf", "resident_bytes"}));
  if (rd.Child("bytes_total")) {
    uint64_t total = 0;
    BERTH_RETURN_IF_ERROR(rd.Get("bytes_total", &total));
    r->bytes_total = total;
  }
  if (InJson* c = rd.Child("config")) {
    Reader rc(*c, path + ".config");
    BERTH_RETURN_IF_ERROR(rc.Keys({"architectures", "model_type", "problem"}));
    ModelConfig config;
    BERTH_RETURN_IF_ERROR(rc.Get("architectures", &config.architectures));
    BERTH_RETURN_IF_ERROR(rc.Get("model_type", &config.model_type));
    if (config.model_type.size() > kMaxModelTypeBytes)
      return Status::InvalidArgument(path + ".config.model_type: longer than " +
                                     std::to_string(kMaxModelTypeBytes) + " bytes");
    BERTH_RETURN_IF_ERROR(rc.Get("problem", &config.problem));
    r->config = config;
  }
  if (InJson* g = rd.Child("gguf")) {
    if (!g->is_object()) return Status::InvalidArgument(path + ".gguf: expected an object");
    std::map<std::string, GgufHeader> files;
    for (const auto& [file, h] : g->items()) {
      Reader rg(h, path + ".gguf." + file.substr(0, 200));
      GgufHeader header;
      BERTH_RETURN_IF_ERROR(rg.Members(&header, kGgufHeaderJson, {"model"}));
      if (InJson* m = rg.Child("model")) {
        header.model.emplace();
        BERTH_RETURN_IF_ERROR(ReadGgufModel(*m, rg.path() + ".model", &*header.model));
      }
      files[file] = header;
    }
    r->gguf = std::move(files);
  }
  if (rd.Child("weights_bytes")) {
    uint64_t weights = 0;
    BERTH_RETURN_IF_ERROR(rd.Get("weights_bytes", &weights));
    r->weights_bytes = weights;
  }
  if (InJson* v = rd.Child("resident_bytes")) {
    if (!v->is_number_unsigned())
      return Status::InvalidArgument(path +
                                     ".resident_bytes: expected a number of bytes (a whole "
                                     "number >= 0)");
    uint64_t resident = 0;
    BERTH_RETURN_IF_ERROR(rd.Get("resident_bytes", &resident));
    r->resident_bytes = resident;
  }
  return Status::Ok();
}

Status ReadMemory(InJson& j, ObservedMemory* m) {
  Reader rd(j, "memory");
  // A byte count is a whole number >= 0: -1 or 1e30 would pass as a huge unsigned one.
  for (const char* key : {"total_bytes", "available_bytes"})
    if (InJson* v = rd.Child(key); v && !v->is_number_unsigned())
      return Status::InvalidArgument(std::string("memory.") + key +
                                     ": expected a number of bytes (a whole number >= 0)");
  BERTH_RETURN_IF_ERROR(rd.Members(m, kMemoryJson));
  if (m->available_bytes > m->total_bytes)
    return Status::InvalidArgument("memory.available_bytes: more than memory.total_bytes");
  return Status::Ok();
}

Status ReadStore(InJson& j, ObservedStore* s) {
  Reader rd(j, "store");
  BERTH_RETURN_IF_ERROR(rd.Members(s, kStoreJson, {"repos"}));
  InJson* repos = rd.Child("repos");
  BERTH_RETURN_IF_ERROR(ExpectArray(repos, "store.repos"));
  if (!repos) return Status::Ok();
  for (size_t i = 0; i < repos->size(); ++i) {
    std::string p = "store.repos[" + std::to_string(i) + "]";
    Reader rr((*repos)[i], p);
    BERTH_RETURN_IF_ERROR(rr.Keys({"repo_id", "revisions"}));
    ObservedRepo repo;
    BERTH_RETURN_IF_ERROR(rr.Get("repo_id", &repo.repo_id));
    InJson* revs = rr.Child("revisions");
    BERTH_RETURN_IF_ERROR(ExpectArray(revs, p + ".revisions"));
    for (size_t k = 0; revs && k < revs->size(); ++k) {
      ObservedRevision rev;
      BERTH_RETURN_IF_ERROR(
          ReadRevision((*revs)[k], p + ".revisions[" + std::to_string(k) + "]", &rev));
      repo.revisions.push_back(std::move(rev));
    }
    s->repos.push_back(std::move(repo));
  }
  return Status::Ok();
}

Status ReadGpus(InJson& j, Observed* o) {
  Reader rd(j, "gpus");
  BERTH_RETURN_IF_ERROR(rd.Keys({"known", "error", "devices"}));
  BERTH_RETURN_IF_ERROR(rd.Get("known", &o->gpus_known));
  BERTH_RETURN_IF_ERROR(rd.Get("error", &o->gpu_error));
  InJson* devs = rd.Child("devices");
  BERTH_RETURN_IF_ERROR(ExpectArray(devs, "gpus.devices"));
  for (size_t i = 0; devs && i < devs->size(); ++i) {
    std::string p = "gpus.devices[" + std::to_string(i) + "]";
    Reader rg((*devs)[i], p);
    ObservedGpu g;
    BERTH_RETURN_IF_ERROR(rg.Members(&g, kGpuJson, {"processes"}));
    InJson* procs = rg.Child("processes");
    BERTH_RETURN_IF_ERROR(ExpectArray(procs, p + ".processes"));
    for (size_t k = 0; procs && k < procs->size(); ++k) {
      Reader rp((*procs)[k], p + ".processes[" + std::to_string(k) + "]");
      GpuProcess proc;
      BERTH_RETURN_IF_ERROR(rp.Members(&proc, kGpuProcessJson));
      g.processes.push_back(std::move(proc));
    }
    o->gpus.push_back(std::move(g));
  }
  return Status::Ok();
}

// Item `i` of units.items.
Result<ObservedUnit> ReadUnit(InJson& item, size_t i) {
  Reader ru(item, "units.items[" + std::to_string(i) + "]");
  ObservedUnit u;
  BERTH_RETURN_IF_ERROR(ru.Members(&u, kUnitJson,
                                   {"content_note", "active_enter_usec", "crash_looping",
                                    "timeout_stop_usec", "last_start_ms"}));
  const bool has_note = ru.Child("content_note") != nullptr;
  if (has_note) BERTH_RETURN_IF_ERROR(ru.Get("content_note", &u.content_note));
  BERTH_RETURN_IF_ERROR(ru.Get("active_enter_usec", &u.active_enter_usec));
  BERTH_RETURN_IF_ERROR(ru.Get("timeout_stop_usec", &u.timeout_stop_usec));
  BERTH_RETURN_IF_ERROR(ru.Get("crash_looping", &u.crash_looping));
  if (ru.Child("last_start_ms")) {
    uint64_t ms = 0;
    BERTH_RETURN_IF_ERROR(ru.Get("last_start_ms", &ms));
    if (ms > kMaxStartMs)
      return Status::InvalidArgument(ru.path() + ".last_start_ms: " + std::to_string(ms) +
                                     " is more than a day (" + std::to_string(kMaxStartMs) +
                                     " ms), not a start's time");
    u.last_start_ms = ms;
  }
  // Derived, never a second source: the default note when the unit did not say one, and the
  // lineage from the text.
  if (!has_note) u.content_note = DefaultContentNote(u);
  u.lineage = u.managed ? UnitLineage(u.content) : "";
  return u;
}

Status ReadUnits(InJson& j, Observed* o) {
  Reader rd(j, "units");
  BERTH_RETURN_IF_ERROR(rd.Keys({"known", "items"}));
  BERTH_RETURN_IF_ERROR(rd.Get("known", &o->units_known));
  InJson* items = rd.Child("items");
  BERTH_RETURN_IF_ERROR(ExpectArray(items, "units.items"));
  if (items) o->units.reserve(items->size());
  for (size_t i = 0; items && i < items->size(); ++i) {
    Result<ObservedUnit> u = ReadUnit((*items)[i], i);
    if (!u.ok()) return u.status();
    o->units.push_back(std::move(*u));
  }
  return Status::Ok();
}

Status ReadFrontConfigs(InJson& j, Observed* o) {
  if (!j.is_object()) return Status::InvalidArgument("front_configs: expected an object");
  for (const auto& [key, text] : j.items()) {
    int port = 0;
    auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), port);
    bool digits =
        !key.empty() && key[0] != '-' && ec == std::errc() && end == key.data() + key.size();
    if (!digits || port < 1 || port > 65535)
      return Status::InvalidArgument("front_configs: '" + EscapeLine(key) + "' is not a port");
    if (!text.is_string() || text.get_ref<const std::string&>().size() > kMaxFrontConfigBytes)
      return Status::InvalidArgument("front_configs." + key + ": expected a string of at most " +
                                     std::to_string(kMaxFrontConfigBytes) + " bytes");
    o->front_configs[port] = text.get<std::string>();
  }
  return Status::Ok();
}

// "sleeping": {"unit.service": true|false}: what each standby's server said of its sleep.
Status ReadSleeping(InJson& j, Observed* o) {
  if (!j.is_object()) return Status::InvalidArgument("sleeping: expected an object");
  for (const auto& [unit, asleep] : j.items()) {
    if (!asleep.is_boolean())
      return Status::InvalidArgument("sleeping." + EscapeLine(unit) + ": expected true or false");
    o->sleeping[unit] = asleep.get<bool>();
  }
  return Status::Ok();
}

Status ReadPorts(InJson& j, Observed* o) {
  Reader rd(j, "ports");
  BERTH_RETURN_IF_ERROR(rd.Keys({"known", "listening"}));
  BERTH_RETURN_IF_ERROR(rd.Get("known", &o->ports_known));
  InJson* items = rd.Child("listening");
  BERTH_RETURN_IF_ERROR(ExpectArray(items, "ports.listening"));
  for (size_t i = 0; items && i < items->size(); ++i) {
    Reader rp((*items)[i], "ports.listening[" + std::to_string(i) + "]");
    ListeningPort p;
    BERTH_RETURN_IF_ERROR(rp.Members(&p, kPortJson));
    o->ports.push_back(std::move(p));
  }
  return Status::Ok();
}

Status ReadHub(InJson& j, Observed* o) {
  BERTH_RETURN_IF_ERROR(ExpectArray(&j, "hub"));
  for (size_t i = 0; i < j.size(); ++i) {
    std::string p = "hub[" + std::to_string(i) + "]";
    Reader rh(j[i], p);
    HubInfo h;
    BERTH_RETURN_IF_ERROR(rh.Members(&h, kHubJson, {"files"}));
    InJson* files = rh.Child("files");
    BERTH_RETURN_IF_ERROR(ExpectArray(files, p + ".files"));
    for (size_t k = 0; files && k < files->size(); ++k) {
      Reader rf((*files)[k], p + ".files[" + std::to_string(k) + "]");
      HubFile f;
      BERTH_RETURN_IF_ERROR(rf.Members(&f, kHubFileJson));
      h.files.push_back(std::move(f));
    }
    o->hub.push_back(std::move(h));
  }
  return Status::Ok();
}

// berth_state.<key>: unit -> milliseconds (start_times_ms, stop_times_ms).
Status ReadTimes(Reader& rd, const std::string& key,
                 std::map<std::string, std::vector<uint64_t>>* out) {
  InJson* times = rd.Child(key.c_str());
  if (!times) return Status::Ok();
  if (!times->is_object())
    return Status::InvalidArgument("berth_state." + key + ": expected an object");
  for (auto it = times->begin(); it != times->end(); ++it) {
    std::string p = "berth_state." + key + "." + it.key();
    BERTH_RETURN_IF_ERROR(ExpectArray(&*it, p));
    std::vector<uint64_t>& ms = (*out)[it.key()];
    for (const auto& v : *it) {
      if (!v.is_number_unsigned())
        return Status::InvalidArgument(p + ": '" + DumpJson(v) +
                                       "' is not a count of milliseconds");
      ms.push_back(v.get<uint64_t>());
    }
  }
  return Status::Ok();
}

Status ReadState(InJson& j, BerthState* s) {
  Reader rd(j, "berth_state");
  BERTH_RETURN_IF_ERROR(
      rd.Members(s, kStateJson,
                 {"failures", "interrupted", "ungated", "started", "held", "learned",
                  "start_times_ms", "start_invocations", "stop_times_ms"}));
  BERTH_RETURN_IF_ERROR(rd.Get("interrupted", &s->interrupted));
  BERTH_RETURN_IF_ERROR(rd.Get("ungated", &s->ungated));
  BERTH_RETURN_IF_ERROR(rd.Get("started", &s->started));
  BERTH_RETURN_IF_ERROR(rd.Get("start_invocations", &s->start_invocations));
  if (InJson* failures = rd.Child("failures")) {
    if (!failures->is_object())
      return Status::InvalidArgument("berth_state.failures: expected an object");
    for (auto it = failures->begin(); it != failures->end(); ++it) {
      Reader rf(*it, "berth_state.failures." + it.key());
      Failure f;
      BERTH_RETURN_IF_ERROR(rf.Members(&f, kFailureJson));
      s->failures[it.key()] = f;
    }
  }
  if (InJson* held = rd.Child("held")) {
    BERTH_RETURN_IF_ERROR(Reader(*held, "berth_state.held").Members(&s->held, kHeldJson));
  }
  if (InJson* learned = rd.Child("learned")) {
    if (!learned->is_object())
      return Status::InvalidArgument("berth_state.learned: expected an object");
    for (auto it = learned->begin(); it != learned->end(); ++it) {
      std::string p = "berth_state.learned." + it.key();
      Reader rl(*it, p);
      BERTH_RETURN_IF_ERROR(rl.Keys({"ports", "gpu_bytes"}));
      LearnedService l;
      BERTH_RETURN_IF_ERROR(rl.Get("ports", &l.ports));
      std::map<std::string, uint64_t> gpus;
      BERTH_RETURN_IF_ERROR(rl.Get("gpu_bytes", &gpus));
      for (const auto& [index, bytes] : gpus) {
        int i = -1;
        auto [end, ec] = std::from_chars(index.data(), index.data() + index.size(), i);
        if (ec != std::errc() || end != index.data() + index.size() || i < 0)
          return Status::InvalidArgument(p + ".gpu_bytes: '" + index + "' is not a GPU index");
        l.gpu_bytes[i] = bytes;
      }
      s->learned[it.key()] = std::move(l);
    }
  }
  BERTH_RETURN_IF_ERROR(ReadTimes(rd, "start_times_ms", &s->start_times_ms));
  return ReadTimes(rd, "stop_times_ms", &s->stop_times_ms);
}

// The parsed document of `text`, or why it is not JSON.
Status Parse(const std::string& text, const std::string& source, InJson* j) {
  if (JsonNestedDeeperThan(text, kMaxJsonDepth))
    return Status::InvalidArgument(source + ": not valid JSON: nested deeper than " +
                                   std::to_string(kMaxJsonDepth) + " levels");
  try {
    *j = InJson::parse(text);
    // parse_error, and out_of_range for a number past a double ("1e400", 100,000 digits).
  } catch (const nlohmann::json::exception& e) {
    // The parser quotes the token: a 100,000-digit number would be the whole message.
    return Status::InvalidArgument(source + ": not valid JSON: " + Excerpt(e.what(), 300));
  }
  return Status::Ok();
}

Result<Observed> FromDocument(InJson& j, const std::string& source) {
  Observed o;
  Reader rd(j, "(top)");
  Status s =
      rd.Keys({"format_version", "hostname", "observed_at", "store", "gpus", "units", "ports",
               "hub", "memory", "front_configs", "sleeping", "berth_state", "warnings"});
  if (s.ok()) {
    int version = 0;
    s = rd.Get("format_version", &version);
    if (s.ok() && version != Observed::kFormatVersion)
      s = Status::InvalidArgument("format_version " + std::to_string(version) +
                                  " is not supported (this berth reads " +
                                  std::to_string(Observed::kFormatVersion) +
                                  "); re-run `berth observe -o json` with this berth");
  }
  if (s.ok()) s = rd.Get("hostname", &o.hostname);
  if (s.ok()) s = rd.Get("observed_at", &o.observed_at);
  if (s.ok() && rd.Child("store")) s = ReadStore(*rd.Child("store"), &o.store);
  if (s.ok() && rd.Child("gpus")) s = ReadGpus(*rd.Child("gpus"), &o);
  if (s.ok() && rd.Child("units")) s = ReadUnits(*rd.Child("units"), &o);
  if (s.ok() && rd.Child("ports")) s = ReadPorts(*rd.Child("ports"), &o);
  if (s.ok() && rd.Child("hub")) s = ReadHub(*rd.Child("hub"), &o);
  if (s.ok() && rd.Child("memory")) s = ReadMemory(*rd.Child("memory"), &o.memory);
  if (s.ok() && rd.Child("front_configs")) s = ReadFrontConfigs(*rd.Child("front_configs"), &o);
  if (s.ok() && rd.Child("sleeping")) s = ReadSleeping(*rd.Child("sleeping"), &o);
  if (s.ok() && rd.Child("berth_state")) s = ReadState(*rd.Child("berth_state"), &o.state);
  if (s.ok()) s = rd.Get("warnings", &o.warnings);
  if (!s.ok()) return s.WithContext(source);
  return o;
}

}  // namespace

Result<Observed> ObservedFromJson(const std::string& text, const std::string& source) {
  InJson j;
  BERTH_RETURN_IF_ERROR(Parse(text, source, &j));
  return FromDocument(j, source);
}

}  // namespace berth
