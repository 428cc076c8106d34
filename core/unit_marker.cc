#include "core/unit_marker.h"

#include <string_view>

namespace berth {
namespace {

bool IsHeaderLine(std::string_view line) {
  return line.starts_with(kUnitMarker) || line.starts_with(kSpecHashKey) ||
         line.starts_with(kLineageKey);
}

// Where the header (berth's comment lines at the top) ends.
size_t HeaderEnd(const std::string& content) {
  size_t pos = 0;
  while (pos < content.size()) {
    size_t eol = content.find('\n', pos);
    std::string_view line(content.data() + pos,
                          (eol == std::string::npos ? content.size() : eol) - pos);
    if (!IsHeaderLine(line)) break;
    pos = eol == std::string::npos ? content.size() : eol + 1;
  }
  return pos;
}

// The value of header line `key`, "" if the header has none.
std::string HeaderValue(const std::string& content, const char* key) {
  std::string_view header(content.data(), HeaderEnd(content));
  std::string_view k(key);
  size_t at = 0;
  while (at < header.size()) {
    size_t eol = header.find('\n', at);
    std::string_view line = header.substr(at, eol == std::string_view::npos ? eol : eol - at);
    if (line.starts_with(k)) return std::string(line.substr(k.size()));
    if (eol == std::string_view::npos) break;
    at = eol + 1;
  }
  return "";
}

bool IsLowerHex(std::string_view s) {
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

}  // namespace

bool IsBerthUnit(const std::string& content) { return content.rfind(kUnitMarker, 0) == 0; }

std::string UnitBody(const std::string& content) { return content.substr(HeaderEnd(content)); }

std::string UnitSpecHash(const std::string& content) {
  // Older units: the spec hash line is the only place the key appears, header or not.
  std::string v = HeaderValue(content, kSpecHashKey);
  if (!v.empty()) return v;
  size_t at = content.find(kSpecHashKey);
  if (at == std::string::npos) return "";
  size_t start = at + std::string(kSpecHashKey).size();
  size_t eol = content.find('\n', start);
  return content.substr(start, eol == std::string::npos ? std::string::npos : eol - start);
}

std::string UnitLineage(const std::string& content) {
  if (!IsBerthUnit(content)) return "";
  std::string v = HeaderValue(content, kLineageKey);
  // A unit file on disk is not trusted: a lineage is short lowercase hex or it is none.
  if (v.empty() || v.size() > 64 || !IsLowerHex(v)) return "";
  return v;
}

namespace {

// The header lines of berth's unit `content` but its lineage.
std::string HeaderWithoutLineage(const std::string& content, size_t end) {
  std::string header;
  size_t pos = 0;
  while (pos < end) {
    size_t eol = content.find('\n', pos);
    size_t next = eol == std::string::npos || eol >= end ? end : eol + 1;
    std::string_view line(content.data() + pos, next - pos);
    if (!line.starts_with(kLineageKey)) header.append(line);
    pos = next;
  }
  return header;
}

}  // namespace

std::string StampLineage(const std::string& content, const std::string& lineage) {
  if (lineage.empty() || !IsBerthUnit(content)) return content;
  size_t end = HeaderEnd(content);
  std::string header = HeaderWithoutLineage(content, end);
  if (!header.empty() && header.back() != '\n') header += '\n';
  return header + kLineageKey + lineage + "\n" + content.substr(end);
}

std::string WithoutLineage(const std::string& content) {
  if (!IsBerthUnit(content)) return content;
  size_t end = HeaderEnd(content);
  return HeaderWithoutLineage(content, end) + content.substr(end);
}

}  // namespace berth
