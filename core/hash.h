// Content hashes (libcrypto): the unit spec hash, manifest digests, observation fingerprints.
#pragma once

#include <string>
#include <string_view>

namespace berth {

/// Lower-case hex sha256 of `data`.
std::string Sha256Hex(std::string_view data);

}  // namespace berth
