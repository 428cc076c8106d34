// The HTTP layer without a server: URL joining (libcurl's URL API), the one retry policy, the
// classification of answers that every caller switches on, the Hub's error messages, and the
// protocols a request may use.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>

#include "providers/http/classify.h"
#include "providers/http/retry_policy.h"
#include "providers/hub/http.h"

namespace berth::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(Urls, ALocationJoinsItsBaseAsRfc3986Says) {
  const std::string base = "https://hub/x/y?q=1";
  EXPECT_EQ(ResolveLocation("https://hub/x/y", "//cdn/x"), "https://cdn/x")
      << "scheme-relative: the base's scheme, another host";
  EXPECT_EQ(ResolveLocation(base, "https://cdn.example/a?sig=2"), "https://cdn.example/a?sig=2");
  EXPECT_EQ(ResolveLocation(base, "/Org/tiny/resolve/main/f"),
            "https://hub/Org/tiny/resolve/main/f");
  EXPECT_EQ(ResolveLocation(base, "z"), "https://hub/x/z");
  EXPECT_EQ(ResolveLocation(base, "../z"), "https://hub/z");
  EXPECT_EQ(ResolveLocation(base, "?cursor=abc"), "https://hub/x/y?cursor=abc");
  EXPECT_EQ(ResolveLocation("http://h:1/a/b?x", "/c/d"), "http://h:1/c/d");
  EXPECT_EQ(ResolveLocation("http://h:1/a/b?x=/s/t", "c?e=%22f%22"), "http://h:1/a/c?e=%22f%22")
      << "a slash in the base's query is not a path segment";
  EXPECT_EQ(ResolveLocation("not a url", "/x"), "");
}

TEST(Urls, OriginsCompareSchemeHostAndPort) {
  EXPECT_EQ(OriginOf("https://huggingface.co/a"), OriginOf("https://huggingface.co:443/b"));
  EXPECT_EQ(OriginOf("https://HuggingFace.co/a"), "https://huggingface.co:443");
  EXPECT_EQ(OriginOf("http://h/a"), "http://h:80");
  EXPECT_NE(OriginOf("http://127.0.0.1:1/a"), OriginOf("http://127.0.0.1:2/a"));
  EXPECT_NE(OriginOf("http://h/a"), OriginOf("https://h/a"));
  EXPECT_NE(OriginOf("https://h.evil/a"), OriginOf("https://h/a"));
  EXPECT_EQ(OriginOf("::"), "");
}

struct ClassifyCase {
  long status;
  CURLcode code;
  HttpOrigin origin;
  HttpOutcome want;
};

TEST(Classify, EveryAnswerHasOneMeaning) {
  const HttpOrigin hub = HttpOrigin::kHub, cdn = HttpOrigin::kCdn;
  const ClassifyCase cases[] = {
      {200, CURLE_OK, hub, HttpOutcome::kOk},
      {206, CURLE_OK, cdn, HttpOutcome::kOk},
      {302, CURLE_OK, hub, HttpOutcome::kRedirect},
      {307, CURLE_OK, hub, HttpOutcome::kRedirect},
      {308, CURLE_OK, hub, HttpOutcome::kRedirect},
      {408, CURLE_OK, hub, HttpOutcome::kRetryable},
      {500, CURLE_OK, hub, HttpOutcome::kRetryable},
      {502, CURLE_OK, cdn, HttpOutcome::kRetryable},
      {503, CURLE_OK, hub, HttpOutcome::kRetryable},
      {504, CURLE_OK, cdn, HttpOutcome::kRetryable},
      {429, CURLE_OK, hub, HttpOutcome::kRateLimited},
      {429, CURLE_OK, cdn, HttpOutcome::kRateLimited},
      {401, CURLE_OK, hub, HttpOutcome::kUnauthorized},
      {403, CURLE_OK, hub, HttpOutcome::kForbidden},
      {404, CURLE_OK, hub, HttpOutcome::kNotFound},
      {404, CURLE_OK, cdn, HttpOutcome::kNotFound},
      {400, CURLE_OK, cdn, HttpOutcome::kUrlExpired},
      {401, CURLE_OK, cdn, HttpOutcome::kUrlExpired},
      {403, CURLE_OK, cdn, HttpOutcome::kUrlExpired},
      {410, CURLE_OK, cdn, HttpOutcome::kUrlExpired},
      {400, CURLE_OK, hub, HttpOutcome::kFatal},
      {416, CURLE_OK, cdn, HttpOutcome::kFatal},
      {501, CURLE_OK, hub, HttpOutcome::kFatal},
      {0, CURLE_OK, hub, HttpOutcome::kFatal},
      // A transport error wins over the status: a 206 cut short is retried.
      {206, CURLE_PARTIAL_FILE, cdn, HttpOutcome::kRetryable},
      {0, CURLE_COULDNT_CONNECT, hub, HttpOutcome::kRetryable},
      {0, CURLE_OPERATION_TIMEDOUT, cdn, HttpOutcome::kRetryable},
      {0, CURLE_RECV_ERROR, cdn, HttpOutcome::kRetryable},
      {0, CURLE_GOT_NOTHING, hub, HttpOutcome::kRetryable},
      {0, CURLE_COULDNT_RESOLVE_HOST, hub, HttpOutcome::kRetryable},
      {0, CURLE_UNSUPPORTED_PROTOCOL, cdn, HttpOutcome::kFatal},
      {0, CURLE_PEER_FAILED_VERIFICATION, hub, HttpOutcome::kFatal},
      {200, CURLE_WRITE_ERROR, cdn, HttpOutcome::kFatal},
  };
  for (const auto& c : cases)
    EXPECT_EQ(OutcomeName(Classify(c.status, c.code, c.origin)), std::string(OutcomeName(c.want)))
        << "HTTP " << c.status << ", " << curl_easy_strerror(c.code) << ", "
        << (c.origin == hub ? "hub" : "cdn");
}

TEST(RetryPolicy, BackoffDoublesToItsCapAndNeverGoesNegative) {
  RetryPolicy p;
  p.first_backoff_ms = 500;
  p.max_backoff_ms = 30000;
  EXPECT_EQ(p.BackoffMs(1), 500);
  EXPECT_EQ(p.BackoffMs(2), 1000);
  EXPECT_EQ(p.BackoffMs(3), 2000);
  EXPECT_EQ(p.BackoffMs(7), 30000);
  EXPECT_EQ(p.BackoffMs(0), 500) << "attempt 0 (a counter that was reset) is no negative shift";
  EXPECT_EQ(p.BackoffMs(-3), 500);
  EXPECT_EQ(p.BackoffMs(1000000), 30000);
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  long previous = 0;
  for (int attempt = -2; attempt < 200; ++attempt) {
    long b = p.BackoffMs(attempt);
    EXPECT_GE(b, previous) << attempt;
    previous = b;
    long d = p.DelayMs(attempt, 0, unit(rng));
    EXPECT_GE(d, b) << attempt;
    EXPECT_LE(d, static_cast<long>(30000 * 1.5)) << attempt;
  }
  RetryPolicy odd;
  odd.first_backoff_ms = -100;
  odd.max_backoff_ms = -5;
  odd.jitter = 7;
  for (int attempt = 0; attempt < 70; ++attempt) {
    EXPECT_EQ(odd.BackoffMs(attempt), 0);
    EXPECT_GE(odd.DelayMs(attempt, -1000, 0.99), 0);
  }
}

TEST(RetryPolicy, TheServerWaitWinsWhenLongerUpToItsCap) {
  RetryPolicy p;
  p.first_backoff_ms = 100;
  p.max_server_wait_ms = 60000;
  EXPECT_EQ(p.DelayMs(1, 3000, 0.0), 3000);
  EXPECT_EQ(p.DelayMs(1, 50, 0.0), 100);
  EXPECT_EQ(p.DelayMs(1, 1L << 40, 0.0), 60000) << "a hostile Retry-After cannot stall berth";
  EXPECT_FALSE(p.MayRetry(p.attempts));
  EXPECT_TRUE(p.MayRetry(p.attempts - 1));
}

TEST(RetryPolicy, RetryAfterAndRateLimitHeaders) {
  HttpResponse r;
  r.headers["retry-after"] = "3";
  EXPECT_EQ(RetryAfterMs(r), 3000);
  r.headers["ratelimit"] = "\"resolvers\";r=0;t=7";
  EXPECT_EQ(RetryAfterMs(r), 7000);
  r.headers["ratelimit"] = "\"resolvers\";r=5;t=7";
  EXPECT_EQ(RetryAfterMs(r), 3000);
  EXPECT_EQ(ServerWaitMs("Wed, 21 Oct 2026 07:28:00 GMT", ""), 0) << "the date form is not read";
  EXPECT_EQ(ServerWaitMs("1.5", ""), 0);
  EXPECT_EQ(ServerWaitMs("-4", ""), 0);
  EXPECT_EQ(ServerWaitMs("", "\"api\";r=0;t=-9"), 0);
  EXPECT_EQ(ServerWaitMs("999999999999999999999999", ""), 86400000L) << "no overflow";
}

HttpResponse Answer(long status, const std::string& code, const std::string& message) {
  HttpResponse r;
  r.status = status;
  if (!code.empty()) r.headers["x-error-code"] = code;
  if (!message.empty()) r.headers["x-error-message"] = message;
  return r;
}

TEST(HubErrors, TheStatusAndXErrorCodeDecideNeverTheWording) {
  Status refused =
      HubError(Answer(401, "", "Invalid credentials in Authorization header"), "x", true);
  EXPECT_THAT(refused.message(), HasSubstr("refused the token"));
  EXPECT_THAT(HubError(Answer(401, "", "something new"), "x", true).message(),
              HasSubstr("refused the token"));
  // The same words on a 403 are not a refused token: no message text is searched.
  Status forbidden = HubError(Answer(403, "", "Invalid credentials; disabled"), "x", true);
  EXPECT_THAT(forbidden.message(), Not(HasSubstr("refused the token")));
  EXPECT_THAT(forbidden.message(), HasSubstr("refuses access"));
  EXPECT_THAT(forbidden.message(), HasSubstr("(Invalid credentials; disabled)"))
      << "the Hub's own message is still shown";
  EXPECT_THAT(HubError(Answer(401, "GatedRepo", ""), "x", false).message(),
              HasSubstr("gated; set HF_TOKEN"));
  EXPECT_THAT(HubError(Answer(403, "GatedRepo", ""), "x", true).message(),
              HasSubstr("no access to the gated repo"));
  EXPECT_THAT(HubError(Answer(401, "RepoNotFound", ""), "x", false).message(),
              HasSubstr("or set HF_TOKEN"));
  EXPECT_THAT(HubError(Answer(404, "RevisionNotFound", ""), "x", true).message(),
              HasSubstr("no such branch, tag or commit"));
  EXPECT_THAT(HubError(Answer(429, "", ""), "x", true).message(), HasSubstr("rate limited"));
  EXPECT_THAT(HubError(Answer(503, "", ""), "x", true).message(), HasSubstr("berth retries"));
}

TEST(HubHttp, OnlyHttpAndHttpsAreSpoken) {
  HubOptions o;
  o.endpoint = "http://127.0.0.1:1";
  HubHttp http(o);
  for (const char* url : {"file:///etc/passwd", "ftp://127.0.0.1/x", "gopher://127.0.0.1/x"}) {
    auto r = http.Do("GET", url);
    ASSERT_FALSE(r.ok()) << url;
    EXPECT_THAT(r.status().message(), HasSubstr(url));
    auto again = http.DoWithRetry("GET", url, "asking");
    EXPECT_FALSE(again.ok());
    EXPECT_THAT(again.status().message(), Not(HasSubstr("gave up after")))
        << "a refused protocol is not retried";
  }
}

}  // namespace
}  // namespace berth::testing
