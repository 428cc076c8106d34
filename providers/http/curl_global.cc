#include "providers/http/curl_global.h"

#include <curl/curl.h>

#include <mutex>

namespace berth {

void CurlGlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

}  // namespace berth
