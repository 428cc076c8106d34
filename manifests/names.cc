#include "manifests/names.h"

namespace berth::manifests {
namespace {

// ASCII only, whatever the locale.
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsAlnum(char c) { return IsDigit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

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
  Result<HfSource> parsed = ::berth::ParseHfSource(source);
  if (!parsed.ok() || parsed->revision_given) return std::nullopt;
  return parsed->repo_id;
}

bool IsEnvKey(std::string_view key) {
  if (key.empty() || IsDigit(key[0])) return false;
  for (char c : key) {
    if (!IsAlnum(c) && c != '_') return false;
  }
  return true;
}

}  // namespace berth::manifests
