#include "engine/state/history.h"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/atomic_file.h"
#include "core/json_text.h"
#include "core/read_file.h"
#include "core/units.h"
#include "core/untrusted_text.h"
#include "engine/state/state.h"

namespace berth {

using ordered_json = nlohmann::ordered_json;

std::string HistoryToJson(const std::vector<HistoryEntry>& entries) {
  ordered_json list = ordered_json::array();
  for (const HistoryEntry& e : entries)
    list.push_back({{"started", e.started},
                    {"duration_ms", e.duration_ms},
                    {"manifest_digest", e.manifest_digest},
                    {"manifest_git_commit", e.manifest_git_commit},
                    {"outcome", e.outcome},
                    {"message", e.message},
                    {"actions", e.actions},
                    {"steps_done", e.steps_done},
                    {"rolled_back", e.rolled_back},
                    {"gates", e.gates}});
  ordered_json j = {{"format_version", 1}, {"applies", list}};
  return DumpJson(j, 2) + "\n";
}

Result<std::vector<HistoryEntry>> HistoryFromJson(const std::string& text,
                                                  const std::string& source) {
  ordered_json j = ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  auto bad = [&](const std::string& what) {
    return Status::InvalidArgument(source + " is damaged: " + what +
                                   "; move it aside and berth starts a new history");
  };
  if (j.is_discarded() || !j.is_object()) return bad("not a JSON object");
  if (!j.contains("format_version") || j["format_version"] != 1)
    return bad("format_version is not 1");
  if (!j.contains("applies") || !j["applies"].is_array()) return bad("no applies list");
  std::vector<HistoryEntry> out;
  for (const auto& a : j["applies"]) {
    if (!a.is_object()) return bad("an apply is not an object");
    HistoryEntry e;
    auto str = [&](const char* key, std::string* v) {
      if (!a.contains(key)) return true;
      if (!a[key].is_string()) return false;
      *v = a[key].get<std::string>();
      return true;
    };
    bool ok = str("started", &e.started) && str("manifest_digest", &e.manifest_digest) &&
              str("manifest_git_commit", &e.manifest_git_commit) && str("outcome", &e.outcome) &&
              str("message", &e.message);
    if (a.contains("duration_ms")) {
      ok = ok && a["duration_ms"].is_number_unsigned();
      if (ok) e.duration_ms = a["duration_ms"].get<uint64_t>();
    }
    if (a.contains("steps_done")) {
      ok = ok && a["steps_done"].is_number_integer();
      if (ok) e.steps_done = a["steps_done"].get<int>();
    }
    if (a.contains("rolled_back")) {
      ok = ok && a["rolled_back"].is_boolean();
      if (ok) e.rolled_back = a["rolled_back"].get<bool>();
    }
    auto strings = [&](const char* key, std::vector<std::string>* v) {
      if (!a.contains(key)) return;
      ok = ok && a[key].is_array();
      for (const auto& x : ok ? a[key] : ordered_json::array()) {
        ok = ok && x.is_string();
        if (ok) v->push_back(x.get<std::string>());
      }
    };
    strings("actions", &e.actions);
    strings("gates", &e.gates);
    if (!ok)
      return bad("apply " + std::to_string(out.size() + 1) + " has a value of the wrong type");
    out.push_back(std::move(e));
  }
  return out;
}

Result<std::vector<HistoryEntry>> ReadHistory(const std::string& dir) {
  std::string path = dir + "/history.json";
  Result<std::string> text = ReadRegularFile(path, {.max_bytes = kMaxStateFileBytes});
  if (!text.ok() && text.status().code() == Status::Code::kNotFound)
    return std::vector<HistoryEntry>{};
  if (!text.ok()) return text.status();
  return HistoryFromJson(*text, path);
}

Status AppendHistory(const std::string& dir, const HistoryEntry& entry) {
  Result<std::vector<HistoryEntry>> entries = ReadHistory(dir);
  // A damaged history is not worth failing an apply for: it starts again beside the old one.
  std::vector<HistoryEntry> list = entries.ok() ? *entries : std::vector<HistoryEntry>{};
  if (!entries.ok()) {
    std::error_code ec;
    std::filesystem::rename(dir + "/history.json", dir + "/history.json.damaged", ec);
  }
  list.push_back(entry);
  if (list.size() > kHistoryKept)
    list.erase(list.begin(), list.begin() + static_cast<long>(list.size() - kHistoryKept));
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  return WriteFileAtomically(dir + "/history.json", HistoryToJson(list));
}

std::string HistoryText(const std::vector<HistoryEntry>& entries, size_t limit) {
  if (entries.empty()) return "No applies recorded yet.\n";
  std::ostringstream out;
  size_t shown = 0;
  for (auto it = entries.rbegin(); it != entries.rend() && shown < limit; ++it, ++shown) {
    // history.json is a file on disk, and its messages quote servers: every field is shown
    // escaped, the message keeping its lines.
    const HistoryEntry& e = *it;
    out << EscapeLine(e.started) << "  " << EscapeLine(e.outcome)
        << (e.rolled_back ? " (rolled back)" : "") << " in " << FormatDurationMs(e.duration_ms)
        << ", " << e.steps_done << " of " << e.actions.size() << " steps; manifest "
        << EscapeLine(e.manifest_git_commit.empty()
                          ? "sha256:" + std::string(Utf8Prefix(e.manifest_digest, 12))
                          : "commit " + std::string(Utf8Prefix(e.manifest_git_commit, 12)))
        << "\n";
    for (size_t i = 0; i < e.actions.size(); ++i)
      out << "    " << (i + 1) << ". " << EscapeLine(e.actions[i]) << "\n";
    for (const std::string& g : e.gates) out << "    measured: " << EscapeLine(g) << "\n";
    if (!e.message.empty()) out << "    " << EscapeControl(e.message) << "\n";
  }
  if (entries.size() > limit)
    out << "(" << (entries.size() - limit) << " older applies not shown; -n N shows more)\n";
  return out.str();
}

}  // namespace berth
