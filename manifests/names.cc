#include "manifests/names.h"

namespace berth::manifests {
namespace {

// ASCII only, whatever the locale.
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsAlnum(char c) { return IsDigit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// ^[A-Za-z0-9][A-Za-z0-9._-]{0,max-1}$
bool IsHubWord(std::string_view s, size_t max) {
  if (s.empty() || s.size() > max || !IsAlnum(s[0])) return false;
  for (char c : s) {
    if (!IsAlnum(c) && c != '.' && c != '_' && c != '-') return false;
  }
  return true;
}

std::string Printable(char c) {
  if (c >= ' ' && c <= '~') return std::string("'") + c + "'";
  static const char kHex[] = "0123456789abcdef";
  unsigned char u = static_cast<unsigned char>(c);
  return std::string("byte 0x") + kHex[u >> 4] + kHex[u & 15];
}

}  // namespace

std::string ModelNameProblem(std::string_view name) {
  if (name.empty()) return "it is empty";
  if (name.size() > 64) return "it is " + std::to_string(name.size()) + " characters (at most 64)";
  if (!IsAlnum(name[0])) return "it must start with a letter or digit";
  for (char c : name) {
    if (!IsAlnum(c) && c != '.' && c != '_' && c != '-') return Printable(c) + " is not allowed";
  }
  return "";
}

std::string UnitNameProblem(std::string_view name) {
  if (name.empty()) return "it is empty";
  if (name[0] == '.') return "it must not start with '.'";
  for (char c : name) {
    if (c == '@') return "'@' is not allowed (template units are not supported)";
    if (!IsAlnum(c) && c != ':' && c != '_' && c != '.' && c != '-') {
      return Printable(c) + " is not allowed";
    }
  }
  const size_t unit_length = name.size() + std::string_view(".service").size();
  if (unit_length > 255) {
    return "'<name>.service' would be " + std::to_string(unit_length) + " characters (at most 255)";
  }
  return "";
}

std::optional<std::string> ParseHfSource(std::string_view source) {
  constexpr std::string_view kScheme = "hf://";
  if (source.substr(0, kScheme.size()) != kScheme) return std::nullopt;
  std::string_view rest = source.substr(kScheme.size());
  size_t slash = rest.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  std::string_view org = rest.substr(0, slash);
  std::string_view repo = rest.substr(slash + 1);
  for (std::string_view part : {org, repo}) {
    if (!IsHubWord(part, 96)) return std::nullopt;
    if (part.find("--") != std::string_view::npos) return std::nullopt;
    if (part.find("..") != std::string_view::npos) return std::nullopt;
  }
  return std::string(rest);
}

bool IsRevision(std::string_view revision) {
  if (revision.empty() || revision.size() > 255 || !IsAlnum(revision[0])) return false;
  if (revision.find("..") != std::string_view::npos) return false;
  for (char c : revision) {
    if (!IsAlnum(c) && c != '.' && c != '_' && c != '/' && c != '+' && c != '-') return false;
  }
  return true;
}

bool IsEnvKey(std::string_view key) {
  if (key.empty() || IsDigit(key[0])) return false;
  for (char c : key) {
    if (!IsAlnum(c) && c != '_') return false;
  }
  return true;
}

bool IsSnapshotRelativePath(std::string_view path) {
  if (path.empty() || path[0] == '/') return false;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    if (path.substr(start, end - start) == "..") return false;
    start = end + 1;
  }
  return true;
}

}  // namespace berth::manifests
