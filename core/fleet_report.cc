#include "core/fleet_report.h"

#include <nlohmann/json.hpp>

#include "core/json_text.h"
#include "core/untrusted_text.h"

namespace berth {
namespace {

using nlohmann::json;

constexpr size_t kMaxText = 4096;

bool IsHexDigest(const std::string& s) {
  if (s.empty() || s.size() > 128) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

// The longest prefix of `s` of at most `max` bytes that does not end inside a UTF-8 character.
size_t CharBoundary(const std::string& s, size_t max) {
  if (s.size() <= max) return s.size();
  size_t n = max;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return n;
}

// Control characters out (the text reaches an operator's terminal), and bounded. `keep_lines`:
// newlines stay (a message's lines); every other control character becomes a space.
std::string Clean(const std::string& s, bool keep_lines = false) {
  std::string out;
  for (unsigned char c : Utf8Prefix(s, kMaxText)) {
    if (keep_lines && c == '\n')
      out += '\n';
    else
      out += (c < 0x20 || c == 0x7f) ? ' ' : char(c);
  }
  return out;
}

bool Blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

}  // namespace

std::string FleetMessageLine(const std::string& message, size_t max_bytes) {
  size_t at = 0;
  std::string line;
  while (at < message.size()) {
    size_t end = message.find('\n', at);
    if (end == std::string::npos) end = message.size();
    size_t b = at, e = end;
    while (b < e && Blank(message[b])) ++b;
    while (e > b && Blank(message[e - 1])) --e;
    at = end + 1;
    if (b == e) continue;
    line = message.substr(b, e - b);
    break;
  }
  bool more = false;
  for (size_t i = at; i < message.size() && !more; ++i)
    more = !Blank(message[i]) && message[i] != '\n';
  for (char& c : line)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  const std::string mark = "…";
  if (line.size() > max_bytes) {
    line.resize(CharBoundary(line, max_bytes > mark.size() ? max_bytes - mark.size() : 0));
    while (!line.empty() && Blank(line.back())) line.pop_back();
    return line + mark;
  }
  return more ? line + " " + mark : line;
}

bool IsFleetState(const std::string& s) {
  for (const char* k : {kFleetConverged, kFleetFailed, kFleetWaiting, kFleetSwitching, kFleetError,
                        kFleetBlocked, kFleetCrashLooping})
    if (s == k) return true;
  return false;
}

bool IsFleetHostName(const std::string& s) {
  if (s.empty() || s.size() > 253) return false;
  for (char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '-' || c == '_';
    if (!ok) return false;
  }
  return true;
}

std::string FleetReportToJson(const FleetReport& r) {
  json j = {{"host", r.host},
            {"wave", r.wave},
            {"digest", r.digest},
            {"state", r.state},
            {"message", r.message.substr(0, CharBoundary(r.message, kMaxText))},
            {"updated_unix", r.updated_unix},
            {"services_up", r.services_up},
            {"services_wanted", r.services_wanted},
            {"start_to_healthy_ms", r.start_to_healthy_ms},
            {"floor_figures", r.floor_figures},
            {"reference_figures", r.reference_figures},
            {"berth_version", r.berth_version}};
  return DumpJson(j);
}

Result<FleetReport> FleetReportFromJson(const std::string& text, const std::string& key) {
  std::string where = EscapeControl(key);  // etcd keys are any bytes
  auto bad = [&](const std::string& why) {
    return Status::Internal("the fleet report at " + where + " is not one berth writes: " + why);
  };
  if (text.size() > kMaxFleetReportBytes) return bad("it is larger than 64 KiB");
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return bad("not a JSON object");
  FleetReport r;
  auto str = [&](const char* k, std::string* out) {
    auto it = j.find(k);
    if (it == j.end()) return true;
    if (!it->is_string()) return false;
    *out = it->get<std::string>();
    return out->size() <= kMaxText;
  };
  auto num = [&](const char* k, int64_t lo, int64_t hi, int64_t* out) {
    auto it = j.find(k);
    if (it == j.end()) return true;
    if (!it->is_number_integer()) return false;
    *out = it->get<int64_t>();
    return *out >= lo && *out <= hi;
  };
  std::string message;
  int64_t up = 0, wanted = 0;
  if (!str("host", &r.host) || !IsFleetHostName(r.host)) return bad("'host' is not a host name");
  if (!str("wave", &r.wave)) return bad("'wave' is not a short string");
  if (!str("digest", &r.digest) || !IsHexDigest(r.digest)) return bad("'digest' is not hex");
  if (!str("state", &r.state) || !IsFleetState(r.state)) return bad("unknown 'state'");
  if (!str("message", &message)) return bad("'message' is not a short string");
  if (!str("berth_version", &r.berth_version)) return bad("'berth_version' is not a string");
  if (!num("updated_unix", 0, INT64_C(1) << 40, &r.updated_unix)) return bad("bad 'updated_unix'");
  if (!num("services_up", 0, 100000, &up) || !num("services_wanted", 0, 100000, &wanted))
    return bad("bad service counts");
  r.services_up = static_cast<int>(up);
  r.services_wanted = static_cast<int>(wanted);
  r.message = Clean(message, /*keep_lines=*/true);
  r.wave = Clean(r.wave);
  r.berth_version = Clean(r.berth_version);
  if (auto it = j.find("start_to_healthy_ms"); it != j.end()) {
    if (!it->is_object() || it->size() > 1000) return bad("bad 'start_to_healthy_ms'");
    for (auto& [unit, ms] : it->items()) {
      if (!ms.is_number_unsigned() || unit.size() > 256) return bad("bad 'start_to_healthy_ms'");
      r.start_to_healthy_ms[Clean(unit)] = ms.get<uint64_t>();
    }
  }
  for (auto [field, out] : {std::pair{"floor_figures", &r.floor_figures},
                            std::pair{"reference_figures", &r.reference_figures}}) {
    auto it = j.find(field);
    if (it == j.end()) continue;
    if (!it->is_object() || it->size() > 1000) return bad(std::string("bad '") + field + "'");
    for (auto& [unit, figures] : it->items()) {
      if (!figures.is_string() || unit.size() > 256 || figures.get<std::string>().size() > kMaxText)
        return bad(std::string("bad '") + field + "'");
      (*out)[Clean(unit)] = Clean(figures.get<std::string>());
    }
  }
  return r;
}

std::string FleetSlotToJson(const FleetSlot& s) {
  json j = {{"host", s.host}, {"digest", s.digest}, {"since_unix", s.since_unix}};
  return DumpJson(j);
}

Result<FleetSlot> FleetSlotFromJson(const std::string& text, const std::string& key) {
  std::string where = EscapeControl(key);  // etcd keys are any bytes
  auto bad = [&](const std::string& why) {
    return Status::Internal("the fleet slot at " + where + " is not one berth writes: " + why);
  };
  if (text.size() > kMaxFleetSlotBytes) return bad("it is larger than 4 KiB");
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return bad("not a JSON object");
  FleetSlot s;
  auto h = j.find("host");
  auto d = j.find("digest");
  auto t = j.find("since_unix");
  if (h == j.end() || !h->is_string() || !IsFleetHostName(h->get<std::string>()))
    return bad("'host' is not a host name");
  s.host = h->get<std::string>();
  if (d != j.end()) {
    if (!d->is_string() || !IsHexDigest(d->get<std::string>())) return bad("'digest' is not hex");
    s.digest = d->get<std::string>();
  }
  if (t != j.end()) {
    if (!t->is_number_integer() || t->get<int64_t>() < 0) return bad("bad 'since_unix'");
    s.since_unix = t->get<int64_t>();
  }
  return s;
}

}  // namespace berth
