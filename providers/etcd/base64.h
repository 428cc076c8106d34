// Base64 (RFC 4648, standard alphabet, padded), as etcd's JSON gateway carries keys and values.
#pragma once

#include <string>
#include <string_view>

namespace berth {

std::string Base64Encode(std::string_view bytes);

/// Strict: a multiple of 4 characters of the standard alphabet, '=' only as the last one or
/// two, no whitespace. False (and `*bytes` unspecified) otherwise.
bool Base64Decode(std::string_view text, std::string* bytes);

}  // namespace berth
