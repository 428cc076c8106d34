// The downloader checks what libcurl's multi interface answers. libcurl cannot be made to fail
// on demand, so this binary interposes curl_multi_perform: it calls the real one, except once,
// when a test arms it, where it answers CURLM_OUT_OF_MEMORY as a starved libcurl would. (Its
// own binary: no other test runs with the interposer.)
#include <curl/curl.h>
#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>

#include "providers/hub/pull.h"
#include "tests/hub/fake_hub_server.h"

namespace {
std::atomic<bool> fail_next_perform{false};
std::atomic<int> failed_performs{0};
}  // namespace

extern "C" CURLMcode curl_multi_perform(CURLM* multi, int* running) {
  using Fn = CURLMcode (*)(CURLM*, int*);
  static Fn real = reinterpret_cast<Fn>(::dlsym(RTLD_NEXT, "curl_multi_perform"));
  if (fail_next_perform.exchange(false)) {
    ++failed_performs;
    return CURLM_OUT_OF_MEMORY;
  }
  return real(multi, running);
}

namespace berth::testing {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

TEST(CurlMultiFault, AFailedMultiPerformStopsTheDownloadAndTheNextRunFinishesIt) {
  char tmpl[] = "/tmp/berth-multi-XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  FakeHubServer hub;
  std::string error;
  ASSERT_TRUE(hub.Start(dir, (4ull << 20) + 1, {}, &error)) << error;
  HubOptions opts;
  opts.endpoint = hub.api();
  opts.connections = 2;
  opts.max_attempts = 2;
  opts.backoff_ms = 10;
  // The first progress report comes from inside the download loop: the next
  // curl_multi_perform of that loop fails.
  bool armed = false;
  opts.on_progress = [&](const PullProgress&) {
    if (!armed) fail_next_perform = armed = true;
  };
  PullRequest req;
  req.store = dir + "/store";
  req.repo_id = "org/big";
  auto r = PullModel(req, opts);
  ASSERT_TRUE(armed);
  EXPECT_EQ(failed_performs.load(), 1);
  ASSERT_FALSE(r.ok()) << "a multi error was ignored";
  EXPECT_THAT(r.status().message(), HasSubstr("curl_multi_perform failed"));
  EXPECT_THAT(r.status().message(), HasSubstr("next run resumes"));
  EXPECT_FALSE(fs::exists(req.store + "/models--org--big/refs/main")) << "nothing published";

  // The fault gone, the next run finishes the download.
  opts.on_progress = nullptr;
  hub.Reset();
  r = PullModel(req, opts);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(fs::exists(req.store + "/models--org--big/refs/main"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace berth::testing
