// URLs through libcurl's URL API (CURLU): joining a Location or a Link with the URL it came
// from, the origin of a URL, and percent-encoding of path segments.
#pragma once

#include <string>

namespace berth {

/// "scheme://host:port" of a URL with the scheme and host lower-cased and the default port made
/// explicit, for same-origin checks; "" when `url` does not parse.
std::string OriginOf(const std::string& url);

/// Resolves a Location (or a Link target) against the URL it came from, as RFC 3986 says:
/// absolute ("https://cdn/x"), scheme-relative ("//cdn/x"), path-absolute ("/x"), relative
/// ("x", "../x") or query-only ("?q"). "" when either does not parse.
std::string ResolveLocation(const std::string& base, const std::string& location);

/// Percent-encodes for a URL path segment; keeps '/' when `keep_slash`.
std::string UrlEncode(const std::string& s, bool keep_slash);

}  // namespace berth
