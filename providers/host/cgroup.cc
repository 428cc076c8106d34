#include "providers/host/cgroup.h"

#include <sstream>
#include <string>
#include <vector>

#include "core/read_file.h"

namespace berth {
namespace {

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

/// systemd escapes cgroup names that would clash with kernel files by prefixing "_".
std::string_view Unescape(std::string_view name) {
  return !name.empty() && name[0] == '_' ? name.substr(1) : name;
}

}  // namespace

std::string UnitOfCgroupPath(std::string_view path) {
  std::string unit;
  std::string_view parent;
  size_t pos = 0;
  while (pos <= path.size()) {
    size_t slash = path.find('/', pos);
    if (slash == std::string_view::npos) slash = path.size();
    std::string_view name = Unescape(path.substr(pos, slash - pos));
    pos = slash + 1;
    if (name.empty()) continue;
    if (EndsWith(name, ".service") && EndsWith(parent, ".slice")) {
      unit = std::string(name);
      if (name.substr(0, 5) == "user@") break;
    }
    parent = name;
  }
  return unit;
}

std::string UnitOfPid(int pid, const std::string& proc_root) {
  Result<std::string> cgroup =
      ReadRegularFile(proc_root + "/" + std::to_string(pid) + "/cgroup", {.max_bytes = 1 << 20});
  std::istringstream in(cgroup.ok() ? *cgroup : std::string());
  std::string line;
  std::string v1_unit;
  std::string v2_unit;
  while (std::getline(in, line)) {
    size_t c1 = line.find(':');
    size_t c2 = c1 == std::string::npos ? c1 : line.find(':', c1 + 1);
    if (c2 == std::string::npos) continue;
    std::string_view id(line.data(), c1);
    std::string_view controllers(line.data() + c1 + 1, c2 - c1 - 1);
    std::string_view path(line.data() + c2 + 1, line.size() - c2 - 1);
    if (id == "0" && controllers.empty()) v2_unit = UnitOfCgroupPath(path);
    if (controllers == "name=systemd") v1_unit = UnitOfCgroupPath(path);
  }
  // Hybrid hosts have both; a v2 hierarchy that systemd does not use reads "0::/".
  return v2_unit.empty() ? v1_unit : v2_unit;
}

}  // namespace berth
