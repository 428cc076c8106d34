#include "engine/core/unit_marker.h"

namespace berth {

bool IsBerthUnit(const std::string& content) { return content.rfind(kUnitMarker, 0) == 0; }

std::string UnitBody(const std::string& content) {
  size_t pos = 0;
  while (pos < content.size()) {
    size_t eol = content.find('\n', pos);
    std::string line =
        content.substr(pos, eol == std::string::npos ? std::string::npos : eol - pos);
    if (!(line.starts_with(kUnitMarker) || line.starts_with(kSpecHashKey))) break;
    pos = eol == std::string::npos ? content.size() : eol + 1;
  }
  return content.substr(pos);
}

std::string UnitSpecHash(const std::string& content) {
  size_t at = content.find(kSpecHashKey);
  if (at == std::string::npos) return "";
  size_t start = at + std::string(kSpecHashKey).size();
  size_t eol = content.find('\n', start);
  return content.substr(start, eol == std::string::npos ? std::string::npos : eol - start);
}

}  // namespace berth
