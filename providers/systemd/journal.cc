#include "providers/systemd/journal.h"

#include <systemd/sd-journal.h>

#include <algorithm>

namespace berth {
namespace {

std::string Field(sd_journal* j, const char* name) {
  const void* data = nullptr;
  size_t len = 0;
  if (sd_journal_get_data(j, name, &data, &len) < 0) return "";
  std::string s(static_cast<const char*>(data), len);
  size_t eq = s.find('=');
  return eq == std::string::npos ? s : s.substr(eq + 1);
}

}  // namespace

std::vector<std::string> SdJournalReader::Tail(const std::string& unit, int lines) {
  sd_journal* j = nullptr;
  int r = directory_.empty() ? sd_journal_open(&j, SD_JOURNAL_LOCAL_ONLY)
                             : sd_journal_open_directory(&j, directory_.c_str(), 0);
  if (r < 0) return {};
  // Lines the service printed, and what systemd said about it ("Failed to execute ...").
  std::string by_unit = "_SYSTEMD_UNIT=" + unit, about_unit = "UNIT=" + unit;
  sd_journal_add_match(j, by_unit.c_str(), 0);
  sd_journal_add_disjunction(j);
  sd_journal_add_match(j, about_unit.c_str(), 0);
  std::vector<std::string> out;
  sd_journal_seek_tail(j);
  while (static_cast<int>(out.size()) < lines && sd_journal_previous(j) > 0) {
    std::string ident = Field(j, "SYSLOG_IDENTIFIER");
    out.push_back((ident.empty() ? "" : ident + ": ") + Field(j, "MESSAGE"));
  }
  sd_journal_close(j);
  std::reverse(out.begin(), out.end());
  return out;
}

}  // namespace berth
