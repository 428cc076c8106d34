#include "engine/apply/reconciler.h"
#include "engine/cli/commands.h"
#include "engine/state/history.h"

namespace berth {

int RunHistory(const std::string& state_dir, const std::string& format, size_t limit,
               std::ostream& out, std::ostream& err) {
  if (format != "text" && format != "json") {
    err << "berth history: unknown output format '" << format << "' (use text or json)\n";
    return kExitError;
  }
  std::string dir = state_dir.empty() ? DefaultStateDir() : state_dir;
  Result<std::vector<HistoryEntry>> entries = ReadHistory(dir);
  if (!entries.ok()) {
    err << "berth history: " << entries.status().message() << "\n";
    return kExitError;
  }
  if (format == "json") {
    std::vector<HistoryEntry> last(
        entries->end() - static_cast<long>(std::min(limit, entries->size())), entries->end());
    out << HistoryToJson(last);
  } else {
    out << HistoryText(*entries, limit);
  }
  return kExitOk;
}

}  // namespace berth
