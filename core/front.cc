#include "core/front.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <set>

namespace berth {

std::string FrontUnitName(int port) { return "berth-front-" + std::to_string(port) + ".service"; }
std::string FrontRuntimeDir(int port) { return "/run/berth/front-" + std::to_string(port); }
std::string FrontAdminSocket(int port) { return FrontRuntimeDir(port) + "/admin.sock"; }
std::string FrontMasterSocket(int port) { return FrontRuntimeDir(port) + "/master.sock"; }
std::string FrontPidFile(int port) { return FrontRuntimeDir(port) + "/haproxy.pid"; }
std::string FrontHoldSocket(int port) { return FrontRuntimeDir(port) + "/hold.sock"; }

FrontSpec DefaultFrontSpec(int port) {
  FrontSpec spec;
  spec.port = port;
  spec.admin_socket = FrontAdminSocket(port);
  spec.master_socket = FrontMasterSocket(port);
  spec.pid_file = FrontPidFile(port);
  spec.hold_socket = FrontHoldSocket(port);
  return spec;
}

namespace {

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '-';
}

bool IsName(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s) {
    if (!IsNameChar(c)) return false;
  }
  return true;
}

}  // namespace

namespace {

/// Whether `s` is a JSON number (RFC 8259): a request's number `model` reads as its text.
bool IsJsonNumber(const std::string& s) {
  size_t i = 0;
  auto digits = [&] {
    size_t from = i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
    return i > from;
  };
  if (i < s.size() && s[i] == '-') ++i;
  if (i < s.size() && s[i] == '0')
    ++i;
  else if (!digits())
    return false;
  if (i < s.size() && s[i] == '.' && (++i, !digits())) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    if (!digits()) return false;
  }
  return i == s.size();
}

}  // namespace

std::string ServedNameProblem(const std::string& n) {
  if (n.empty() || n.size() > kMaxServedNameBytes)
    return "is not 1.." + std::to_string(kMaxServedNameBytes) + " bytes";
  if (std::any_of(n.begin(), n.end(), [](unsigned char ch) { return ch < 0x20 || ch > 0x7e; }))
    return "is not printable ASCII (a client's \\u escape of a wider character would not match "
           "it)";
  if (IsJsonNumber(n)) return "is a JSON number (a request's number model would match)";
  return "";
}

bool IsPlainFrontWord(const std::string& s) {
  if (s.empty() || s.size() > 200) return false;
  for (char c : s) {
    if (c <= ' ' || c >= 0x7f || c == '"' || c == '\'' || c == '\\' || c == '#' || c == '$' ||
        c == '%')
      return false;
  }
  return true;
}

bool IsFrontBindAddress(const std::string& bind) {
  std::string host = FrontBindHost(bind);
  in6_addr v6;
  in_addr v4;
  if (host != bind) return ::inet_pton(AF_INET6, host.c_str(), &v6) == 1;  // "[...]"
  if (::inet_pton(AF_INET, host.c_str(), &v4) == 1 || ::inet_pton(AF_INET6, host.c_str(), &v6) == 1)
    return true;
  // A host name (RFC 1123): labels of letters, digits and '-', 1-63 bytes, not starting or
  // ending with '-'; the last not all digits (that is a malformed IPv4 address).
  if (host.empty() || host.size() > 253) return false;
  size_t start = 0;
  while (true) {
    size_t dot = host.find('.', start);
    std::string label =
        host.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-')
      return false;
    bool digits = true;
    for (char c : label) {
      bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
      if (!alnum && c != '-') return false;
      digits = digits && c >= '0' && c <= '9';
    }
    if (dot == std::string::npos) return !digits;
    start = dot + 1;
  }
}

std::string FrontBindHost(const std::string& bind) {
  if (bind.size() > 2 && bind.front() == '[' && bind.back() == ']')
    return bind.substr(1, bind.size() - 2);
  return bind;
}

std::string FrontSpecProblems(const FrontSpec& spec) {
  std::string out;
  auto problem = [&out](const std::string& p) { out += p + "\n"; };
  if (spec.port < 1 || spec.port > 65535)
    problem("front port " + std::to_string(spec.port) + " is not 1..65535");
  if (!IsFrontBindAddress(spec.bind))
    problem("front bind '" + spec.bind.substr(0, 80) +
            "' is not one IPv4 or IPv6 address or host name");
  if (spec.hold_ms == 0) problem("front hold_ms is 0");
  if (spec.idle_ms == 0) problem("front idle_ms is 0");
  if (spec.drain_ms == 0) problem("front drain_ms is 0");
  if (spec.buffer_bytes < 16384 || spec.buffer_bytes > (64u << 20))
    problem("front buffer_bytes is not 16 KiB..64 MiB");
  if (spec.max_connections < 1) problem("front max_connections is below 1");
  if (!spec.ready_path.empty() && (spec.ready_path[0] != '/' || !IsPlainFrontWord(spec.ready_path)))
    problem("front ready path '" + spec.ready_path + "' is not a plain absolute path");
  for (const auto* path :
       {&spec.admin_socket, &spec.master_socket, &spec.pid_file, &spec.hold_socket}) {
    if (path->empty() || (*path)[0] != '/' || !IsPlainFrontWord(*path))
      problem("front socket or pid file path '" + *path + "' is not a plain absolute path");
  }
  for (const auto* path : {&spec.admin_socket, &spec.master_socket, &spec.hold_socket}) {
    if (path->size() > kMaxUnixSocketPath)
      problem("front socket path '" + *path + "' is longer than a unix socket's " +
              std::to_string(kMaxUnixSocketPath) + " bytes");
  }
  std::set<std::string> names;
  for (const FrontBackend& b : spec.backends) {
    if (!IsName(b.name)) problem("front backend name '" + b.name + "' is not [A-Za-z0-9_.-]+");
    if (b.name == kFrontHoldServer) problem("front backend name 'hold' is the hold server's");
    if (!names.insert(b.name).second) problem("front backend '" + b.name + "' is named twice");
    if (!IsPlainFrontWord(b.host))
      problem("front backend '" + b.name + "' host is not a plain word");
    if (b.port < 1 || b.port > 65535)
      problem("front backend '" + b.name + "' port " + std::to_string(b.port) + " is not 1..65535");
  }
  if (!spec.active.empty() && spec.active != kFrontHoldServer && !names.count(spec.active))
    problem("front active '" + spec.active + "' is neither a backend nor 'hold'");
  return out;
}

}  // namespace berth
