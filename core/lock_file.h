// berth.lock: the commit each model's branch or tag was resolved to, beside the manifests (like
// Cargo.lock or flake.lock). JSON with a stable key order, so a `berth lock --update` is a
// small, reviewable diff:
//
//   {
//     "format_version": 1,
//     "models": {
//       "minimax-m25": {
//         "commit": "9a8b7c6...",           40 hex
//         "locked_at": "2026-12-01T06:00:00Z",
//         "repo": "MiniMaxAI/MiniMax-M2.5",
//         "revision": "main"               as the manifest asked
//       }
//     }
//   }
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "core/desired.h"
#include "core/status.h"

namespace berth {

inline constexpr char kLockFileName[] = "berth.lock";
inline constexpr int kLockFormatVersion = 1;

/// Where the lock of `manifest_path` lives: in the folder, or beside a single manifest file.
std::string LockFilePath(const std::string& manifest_path);

/// Parses a lock file's text. InvalidArgument says what is wrong and where in the document
/// ("models.minimax-m25.commit: 'x' is not a 40-hex commit"); unknown keys are errors.
Result<std::map<std::string, LockEntry>> ParseLockFile(std::string_view text);

/// The file's text: keys sorted, two-space indent, a final newline.
std::string SerializeLockFile(const std::map<std::string, LockEntry>& entries);

}  // namespace berth
