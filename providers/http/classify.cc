#include "providers/http/classify.h"

namespace berth {
namespace {

/// Transport errors that a new attempt cannot fix: berth's own setup, the server's identity,
/// a protocol berth refuses (file://, ftp:// in a redirect), a callback that stopped on purpose.
bool PermanentTransportError(CURLcode code) {
  switch (code) {
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_URL_MALFORMAT:
    case CURLE_NOT_BUILT_IN:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_INVALIDCERTSTATUS:
    case CURLE_OUT_OF_MEMORY:
    case CURLE_WRITE_ERROR:
    case CURLE_ABORTED_BY_CALLBACK:
    case CURLE_TOO_MANY_REDIRECTS:
    case CURLE_BAD_FUNCTION_ARGUMENT:
    case CURLE_RANGE_ERROR:
    case CURLE_FILESIZE_EXCEEDED:
      return true;
    default:
      return false;
  }
}

}  // namespace

HttpOutcome Classify(long status, CURLcode code, HttpOrigin origin) {
  if (code != CURLE_OK)
    return PermanentTransportError(code) ? HttpOutcome::kFatal : HttpOutcome::kRetryable;
  if (status >= 200 && status < 300) return HttpOutcome::kOk;
  if (status >= 300 && status < 400) return HttpOutcome::kRedirect;
  switch (status) {
    case 408:
    case 500:
    case 502:
    case 503:
    case 504:
      return HttpOutcome::kRetryable;
    case 429:
      return HttpOutcome::kRateLimited;
    case 404:
      return HttpOutcome::kNotFound;
    default:
      break;
  }
  if (origin == HttpOrigin::kCdn &&
      (status == 400 || status == 401 || status == 403 || status == 410))
    return HttpOutcome::kUrlExpired;
  if (status == 401) return HttpOutcome::kUnauthorized;
  if (status == 403) return HttpOutcome::kForbidden;
  return HttpOutcome::kFatal;  // 416, other 4xx, 501, 505, a status line that makes no sense
}

const char* OutcomeName(HttpOutcome outcome) {
  switch (outcome) {
    case HttpOutcome::kOk:
      return "kOk";
    case HttpOutcome::kRedirect:
      return "kRedirect";
    case HttpOutcome::kRetryable:
      return "kRetryable";
    case HttpOutcome::kRateLimited:
      return "kRateLimited";
    case HttpOutcome::kUnauthorized:
      return "kUnauthorized";
    case HttpOutcome::kForbidden:
      return "kForbidden";
    case HttpOutcome::kNotFound:
      return "kNotFound";
    case HttpOutcome::kUrlExpired:
      return "kUrlExpired";
    case HttpOutcome::kFatal:
      return "kFatal";
  }
  return "?";
}

}  // namespace berth
