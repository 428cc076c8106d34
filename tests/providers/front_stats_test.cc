// `show stat` as HAProxy 2.6 writes it, and as a broken or hostile socket might: parsed into
// the front's counters or refused with a Status, never an exception. Also the wait for a
// server's streams to end, on a fake clock.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>

#include "core/front.h"
#include "providers/front/haproxy_admin.h"
#include "tests/support/fake_clock.h"

namespace berth {
namespace {

using ::testing::HasSubstr;

// HAProxy 2.6.12's header and rows (trimmed to the first columns' worth of real values, the
// rest empty as HAProxy leaves unused fields).
const char* kHeader =
    "# pxname,svname,qcur,qmax,scur,smax,slim,stot,bin,bout,dreq,dresp,ereq,econ,eresp,wretr,"
    "wredis,status,weight,act,bck,chkfail,chkdown,lastchg,downtime,qlimit,pid,iid,sid,throttle,"
    "lbtot,tracked,type,rate,rate_lim,rate_max,check_status,check_code,check_duration,hrsp_1xx,"
    "hrsp_2xx,hrsp_3xx,hrsp_4xx,hrsp_5xx,hrsp_other,hanafail,req_rate,req_rate_max,req_tot,"
    "cli_abrt,srv_abrt\n";

std::string Row(const std::string& px, const std::string& sv, const std::string& status, int scur,
                int stot, int wretr, int wredis, int h5xx, int req_tot) {
  // 51 columns, as the header above.
  std::vector<std::string> f(51);
  f[0] = px;
  f[1] = sv;
  f[2] = "0";
  f[4] = std::to_string(scur);
  f[7] = std::to_string(stot);
  f[15] = std::to_string(wretr);
  f[16] = std::to_string(wredis);
  f[17] = status;
  f[43] = std::to_string(h5xx);
  f[48] = std::to_string(req_tot);
  std::string out;
  for (size_t i = 0; i < f.size(); ++i) out += (i ? "," : "") + f[i];
  return out + "\n";
}

std::string Sample() {
  return std::string(kHeader) + Row("front", "FRONTEND", "OPEN", 3, 40, 0, 0, 2, 41) +
         Row("models", "kimi", "no check", 2, 30, 0, 0, 0, 0) +
         Row("models", "minimax", "MAINT", 1, 9, 0, 0, 1, 0) +
         Row("models", "hold", "MAINT", 0, 0, 6, 3, 0, 0) +
         Row("models", "BACKEND", "UP", 3, 39, 6, 3, 1, 39) +
         Row("ready", "ready", "no check", 0, 0, 0, 0, 0, 0) +
         Row("hold", "FRONTEND", "OPEN", 0, 3, 0, 0, 0, 3) + "\n";
}

TEST(ShowStatTest, ReadsTheFrontendTheBackendAndEachServer) {
  auto stats = ParseShowStat(Sample());
  ASSERT_TRUE(stats.ok()) << stats.status().message();
  EXPECT_EQ(stats->requests, 41);
  EXPECT_EQ(stats->responses_5xx, 2);
  EXPECT_EQ(stats->current_sessions, 3);
  EXPECT_EQ(stats->retries, 6);
  EXPECT_EQ(stats->redispatches, 3);
  ASSERT_EQ(stats->servers.size(), 3u);  // the model servers and hold; not ready/ready
  EXPECT_EQ(stats->Server("kimi")->current_sessions, 2);
  EXPECT_EQ(stats->Server("kimi")->total_sessions, 30);
  EXPECT_EQ(stats->Server("kimi")->status, "no check");
  EXPECT_EQ(stats->Server("minimax")->responses_5xx, 1);
  EXPECT_EQ(stats->Server("hold")->retries, 6);
  EXPECT_EQ(stats->Server("nobody"), nullptr);
}

TEST(ShowStatTest, ColumnsAreFoundByName) {
  // Columns in another order, with one more: still read by name.
  std::string csv =
      "# svname,pxname,extra,status,scur,stot,qcur,wretr,wredis,hrsp_5xx,req_tot\n"
      "kimi,models,x,no check,4,5,0,0,0,0,\n";
  auto stats = ParseShowStat(csv);
  ASSERT_TRUE(stats.ok()) << stats.status().message();
  EXPECT_EQ(stats->Server("kimi")->current_sessions, 4);
}

TEST(ShowStatTest, BrokenAnswersAreStatusesNamingTheLine) {
  EXPECT_FALSE(ParseShowStat("").ok());
  EXPECT_FALSE(ParseShowStat("Unknown command.\n").ok());
  EXPECT_FALSE(ParseShowStat("# pxname,svname\nfront,FRONTEND\n").ok());  // columns missing
  std::string sample = Sample();
  // Cut inside the third row: a short row.
  auto cut = ParseShowStat(sample.substr(0, sample.find("models,minimax") + 20));
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.status().message().find("line 4"), std::string::npos) << cut.status().message();
  // Not a count: letters, a sign, an overflow.
  for (const char* bad : {"12x", "-1", "99999999999999999999999"}) {
    std::string csv = std::string(kHeader) + Row("models", "kimi", "UP", 0, 0, 0, 0, 0, 0);
    csv.replace(csv.find("models,kimi,0,,0,"), 17, std::string("models,kimi,0,,") + bad + ",");
    auto r = ParseShowStat(csv);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("scur"), std::string::npos) << r.status().message();
  }
}

TEST(ShowStatTest, HostileBytesNeverThrow) {
  std::mt19937 rng(22);
  const std::string sample = Sample();
  for (int i = 0; i < 2000; ++i) {
    std::string s = sample.substr(0, rng() % (sample.size() + 1));
    int flips = static_cast<int>(rng() % 8);
    for (int k = 0; k < flips && !s.empty(); ++k) s[rng() % s.size()] = static_cast<char>(rng());
    EXPECT_NO_THROW({
      auto r = ParseShowStat(s);
      (void)r;
    });
  }
  // A name with control bytes and a huge status stay bounded.
  std::string evil =
      std::string(kHeader) +
      Row("models", std::string("\x1b[2J") + std::string(5000, 'n'), "UP", 0, 0, 0, 0, 0, 0);
  auto r = ParseShowStat(evil);
  ASSERT_TRUE(r.ok());
  EXPECT_LE(r->servers.at(0).name.size(), 200u);
}

/// A front whose server carries a stream fewer at each look.
class CountdownFront : public FrontControl {
 public:
  explicit CountdownFront(int64_t sessions) : sessions_(sessions) {}
  Status Route(const std::string&) override { return Status::Ok(); }
  Status Hold() override { return Status::Ok(); }
  Status Drain(const std::string&) override { return Status::Ok(); }
  Result<int64_t> Sessions(const std::string&) override {
    ++looks;
    if (fail) return Status::Unavailable("socket gone");
    return sessions_ > 0 ? sessions_-- : 0;
  }
  Status SetReady(bool) override { return Status::Ok(); }
  Result<FrontStats> Stats() override { return FrontStats{}; }
  int looks = 0;
  bool fail = false;

 private:
  int64_t sessions_;
};

// The file a front loads next against what it serves now (issue 37, 2): a reload HAProxy
// refused, or a kill between the write and the reload, left a file berth then believed.
FrontStats Serving(std::vector<std::pair<std::string, std::string>> servers) {
  FrontStats s;
  for (auto& [name, status] : servers) s.servers.push_back({name, status});
  return s;
}
const std::string kFile =
    "# berth-front-active: svc-a\nglobal\n  master-worker\n\nbackend models\n"
    "  server svc-a 127.0.0.1:20001\n  server svc-b 127.0.0.1:20002 disabled\n"
    "  server hold unix@/f/8000.hold disabled\n\nbackend ready\n  server ready unix@/x\n";

TEST(FrontAsRunningTest, AFileThatAgreesWithTheRunningFrontIsUnchanged) {
  EXPECT_EQ(FrontAsRunning(kFile,
                           Serving({{"svc-a", "no check"}, {"svc-b", "MAINT"}, {"hold", "MAINT"}})),
            kFile);
}

TEST(FrontAsRunningTest, OtherServersRunningMakeTheFileDifferSayingWhat) {
  std::string seen = FrontAsRunning(kFile, Serving({{"svc-a", "no check"}, {"hold", "MAINT"}}));
  EXPECT_EQ(seen.rfind(kFile, 0), 0u);
  EXPECT_THAT(seen, HasSubstr("# berth: the running front serves svc-a, hold, not the servers "
                              "of this file (svc-a, svc-b, hold)"));
}

TEST(FrontAsRunningTest, ARouteMadeAtRunTimeIsWhatTheFirstLineSays) {
  std::string seen = FrontAsRunning(
      kFile, Serving({{"svc-a", "MAINT"}, {"svc-b", "no check"}, {"hold", "DRAIN"}}));
  EXPECT_EQ(seen.rfind("# berth-front-active: svc-b\nglobal\n", 0), 0u) << seen;
  EXPECT_THAT(seen, HasSubstr("# berth: this file routes to svc-a; the running front routes "
                              "to svc-b"));
  // No one server ready (every one in maintenance, or two): the file is left as it is.
  EXPECT_EQ(
      FrontAsRunning(kFile, Serving({{"svc-a", "MAINT"}, {"svc-b", "MAINT"}, {"hold", "MAINT"}})),
      kFile);
}

TEST(FrontAsRunningTest, ARoutedFrontIsComparedByItsModelServers) {
  const std::string file =
      "# berth-front-active: \nglobal\n  master-worker\n\nbackend model-chat\n"
      "  server chat 127.0.0.1:20001\n  server hold unix@/f/8000.hold disabled\n\n"
      "backend model-embed\n  server embed 127.0.0.1:20002\n"
      "  server hold unix@/f/8000.hold disabled\n\nbackend ready\n  server ready unix@/x\n";
  auto stats =
      ParseShowStat(std::string(kHeader) + Row("front", "FRONTEND", "OPEN", 0, 0, 0, 0, 0, 0) +
                    Row("model-chat", "chat", "no check", 0, 0, 0, 0, 0, 0) +
                    Row("model-chat", "hold", "MAINT", 0, 0, 0, 0, 0, 0) +
                    Row("model-chat", "BACKEND", "UP", 0, 0, 0, 0, 0, 0) +
                    Row("model-embed", "embed", "no check", 0, 0, 0, 0, 0, 0) +
                    Row("model-embed", "hold", "MAINT", 0, 0, 0, 0, 0, 0));
  ASSERT_TRUE(stats.ok()) << stats.status().message();
  EXPECT_EQ(stats->routed, (std::vector<std::string>{"model-chat/chat", "model-embed/embed"}));
  EXPECT_EQ(FrontAsRunning(file, *stats), file);
  // A running front reloaded by hand on another file (embed gone): the plan writes it again.
  stats->routed.pop_back();
  EXPECT_THAT(FrontAsRunning(file, *stats),
              HasSubstr("# berth: the running front routes to model-chat/chat, not to the model "
                        "servers of this file (model-chat/chat, model-embed/embed)"));
}

TEST(WaitForNoSessionsTest, WaitsUntilTheLastStreamEnds) {
  testing::FakeClock clock;
  CountdownFront front(3);
  EXPECT_TRUE(WaitForNoSessions(front, "kimi", clock, std::chrono::seconds(60)).ok());
  EXPECT_EQ(front.looks, 4);
  EXPECT_EQ(clock.Elapsed(), std::chrono::milliseconds(1500));
}

TEST(WaitForNoSessionsTest, GivesUpAtTheTimeoutSayingHowManyAreLeft) {
  testing::FakeClock clock;
  CountdownFront front(1000);
  Status s = WaitForNoSessions(front, "kimi", clock, std::chrono::seconds(2));
  EXPECT_EQ(s.code(), Status::Code::kUnavailable);
  EXPECT_NE(s.message().find("still carries"), std::string::npos) << s.message();
  EXPECT_EQ(clock.Elapsed(), std::chrono::seconds(2));
}

TEST(WaitForNoSessionsTest, AFailedReadEndsTheWait) {
  testing::FakeClock clock;
  CountdownFront front(5);
  front.fail = true;
  EXPECT_EQ(WaitForNoSessions(front, "kimi", clock, std::chrono::seconds(60)).message(),
            "socket gone");
  EXPECT_EQ(front.looks, 1);
}

}  // namespace
}  // namespace berth
