// berth's header in the unit files it writes: who wrote the file, the hash of what it wrote (so
// that a hand edit shows as drift) and the state lineage that wrote it (so that only units of
// this state directory are ever berth's to change or prune).
#pragma once

#include <string>

namespace berth {

/// The first header line; a unit whose file starts with it was written by some berth.
inline constexpr const char* kUnitMarker = "# Managed by berth";
/// The header line that carries the spec hash: "# berth-spec-hash: <hex>".
inline constexpr const char* kSpecHashKey = "# berth-spec-hash: ";
/// The header line that carries the lineage of the state directory whose apply wrote the file:
/// "# berth-lineage: <hex>". Stamped when the file is written, not part of the plan's content
/// (a plan can be made before the state directory has a lineage).
inline constexpr const char* kLineageKey = "# berth-lineage: ";

/// Whether `content` carries berth's marker on its first line.
bool IsBerthUnit(const std::string& content);
/// The body of a unit file: everything after berth's header comment lines.
std::string UnitBody(const std::string& content);
/// The spec hash recorded in berth's header, "" if none.
std::string UnitSpecHash(const std::string& content);
/// The lineage recorded in berth's header, "" if none (or not a plausible lineage).
std::string UnitLineage(const std::string& content);
/// `content` with its header's lineage line set to `lineage` (added after the other header
/// lines, or replaced). Content without berth's marker, or an empty lineage, is returned as is.
std::string StampLineage(const std::string& content, const std::string& lineage);
/// `content` without its header's lineage line: what a plan's unit content is compared with
/// when a reviewer is shown the change (the lineage is stamped at write, never a change).
/// Content without berth's marker is returned as is.
std::string WithoutLineage(const std::string& content);

}  // namespace berth
