#include "providers/http/curl_easy.h"

#include <cctype>

namespace berth {

void RestrictToHttp(CURL* easy) {
  curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(easy, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
}

std::string ResponseHeader(CURL* easy, const char* name) {
  curl_header* h = nullptr;
  if (curl_easy_header(easy, name, 0, CURLH_HEADER, -1, &h) != CURLHE_OK || !h) return "";
  // A repeated header: the last one wins, as in ResponseHeaders.
  return h->amount > 1 &&
                 curl_easy_header(easy, name, h->amount - 1, CURLH_HEADER, -1, &h) != CURLHE_OK
             ? ""
             : std::string(h->value);
}

std::map<std::string, std::string> ResponseHeaders(CURL* easy) {
  std::map<std::string, std::string> out;
  for (curl_header* h = curl_easy_nextheader(easy, CURLH_HEADER, -1, nullptr); h;
       h = curl_easy_nextheader(easy, CURLH_HEADER, -1, h)) {
    std::string name(h->name);
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    out[name] = h->value;
  }
  return out;
}

long ResponseStatus(CURL* easy) {
  long status = 0;
  curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
  return status;
}

namespace {

size_t AppendBounded(char* data, size_t size, size_t nmemb, void* user) {
  auto* body = static_cast<BoundedBody*>(user);
  size_t n = size * nmemb;
  if (body->text.size() + n > body->limit) {
    body->truncated = true;
    return 0;  // makes curl stop with CURLE_WRITE_ERROR
  }
  body->text.append(data, n);
  return n;
}

}  // namespace

void WriteInto(CURL* easy, BoundedBody* body) {
  curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, &AppendBounded);
  curl_easy_setopt(easy, CURLOPT_WRITEDATA, body);
}

}  // namespace berth
