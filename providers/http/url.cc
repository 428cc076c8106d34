#include "providers/http/url.h"

#include <curl/curl.h>

#include <cctype>
#include <memory>

namespace berth {
namespace {

using UrlHandle = std::unique_ptr<CURLU, decltype(&curl_url_cleanup)>;

UrlHandle Parse(const std::string& url) {
  UrlHandle h(curl_url(), &curl_url_cleanup);
  if (h && curl_url_set(h.get(), CURLUPART_URL, url.c_str(), 0) != CURLUE_OK) h.reset();
  return h;
}

/// One part of `h`, "" when it has none.
std::string Part(CURLU* h, CURLUPart part, unsigned int flags = 0) {
  char* value = nullptr;
  if (curl_url_get(h, part, &value, flags) != CURLUE_OK || !value) return "";
  std::string out(value);
  curl_free(value);
  return out;
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

std::string OriginOf(const std::string& url) {
  UrlHandle h = Parse(url);
  if (!h) return "";
  return Lower(Part(h.get(), CURLUPART_SCHEME)) + "://" + Lower(Part(h.get(), CURLUPART_HOST)) +
         ":" + Part(h.get(), CURLUPART_PORT, CURLU_DEFAULT_PORT);
}

std::string ResolveLocation(const std::string& base, const std::string& location) {
  UrlHandle h = Parse(base);
  // Setting a URL on a handle that holds one resolves it as a redirect would.
  if (!h || curl_url_set(h.get(), CURLUPART_URL, location.c_str(), 0) != CURLUE_OK) return "";
  return Part(h.get(), CURLUPART_URL);
}

std::string UrlEncode(const std::string& s, bool keep_slash) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' ||
        (keep_slash && c == '/')) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

}  // namespace berth
