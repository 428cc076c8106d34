// berth's header in the unit files it writes: who wrote the file and the hash of what it wrote,
// so that a hand edit shows as drift and only berth's own units are ever pruned.
#pragma once

#include <string>

namespace berth {

/// The first header line; a unit whose file starts with it is berth's.
inline constexpr const char* kUnitMarker = "# Managed by berth";
/// The header line that carries the spec hash: "# berth-spec-hash: <hex>".
inline constexpr const char* kSpecHashKey = "# berth-spec-hash: ";

/// Whether `content` carries berth's marker on its first line.
bool IsBerthUnit(const std::string& content);
/// The body of a unit file: everything after berth's header comment lines.
std::string UnitBody(const std::string& content);
/// The spec hash recorded in berth's header, "" if none.
std::string UnitSpecHash(const std::string& content);

}  // namespace berth
