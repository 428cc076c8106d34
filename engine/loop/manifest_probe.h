// A cheap check whether the manifest changed: stat() of the file, or of the folder and each of
// its *.yaml / *.yml files, and of berth.lock beside them (what LoadManifests reads), without
// reading or parsing anything.
#pragma once

#include <string>

namespace berth {

/// A fingerprint of `path`'s manifest files: names, inodes, sizes and modification times.
/// Equal fingerprints mean nothing was saved since; a `touch` changes it (and so starts a pass).
/// A missing path has a fingerprint too ("missing"), so its reappearance is a change.
std::string ManifestFingerprint(const std::string& path);

}  // namespace berth
