// The metrics textfile, exactly as node_exporter's textfile collector reads it, and its atomic
// write.
#include "engine/loop/metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace berth::testing {
namespace {

RunReport Pass(Outcome o, size_t actions, uint64_t bytes, int up, int wanted) {
  RunReport r;
  r.outcome = o;
  r.plan.actions.resize(actions);
  r.exec.bytes_downloaded = bytes;
  r.services_up = up;
  r.services_wanted = wanted;
  r.observed = true;
  for (int i = 0; i < wanted; ++i) r.service_up["svc-" + std::to_string(i)] = i < up;
  return r;
}

// The pass that fails and holds the change says so: the loop then waits without a pass, and
// its file must not say 0 meanwhile. A pass that ended before it observed (a busy lock) keeps it.
TEST(Metrics, AChangeIsHeldFromTheFailingPassOnUntilAPassClearsIt) {
  LoopMetrics m;
  RunReport failed = Pass(Outcome::kFailed, 3, 0, 1, 1);
  failed.change_held = true;
  m.Record(failed, 1700000000, 1);
  EXPECT_THAT(MetricsText(m), ::testing::HasSubstr("\nberth_change_held 1\n"));
  RunReport busy;
  busy.outcome = Outcome::kError;
  m.Record(busy, 1700000300, 1);
  EXPECT_THAT(MetricsText(m), ::testing::HasSubstr("\nberth_change_held 1\n"));
  m.Record(Pass(Outcome::kApplied, 3, 0, 1, 1), 1700000600, 1);
  EXPECT_THAT(MetricsText(m), ::testing::HasSubstr("\nberth_change_held 0\n"));
}

TEST(Metrics, ACrashLoopingServiceIsNotUpAndCarriesItsRestarts) {
  LoopMetrics m;
  RunReport r = Pass(Outcome::kNoChanges, 0, 0, 1, 2);
  r.crash_looping["svc-1"] = "restarted 7 times by systemd, now activating/auto-restart";
  r.restarts = {{"svc-0", 0}, {"svc-1", 7}};
  m.Record(r, 1700000000, 1);
  std::string text = MetricsText(m);
  EXPECT_THAT(
      text, ::testing::HasSubstr("berth_service_up{service=\"svc-1\",unit=\"svc-1.service\"} 0\n"));
  EXPECT_THAT(text, ::testing::HasSubstr("\nberth_services_crash_looping 1\n"));
  EXPECT_THAT(text,
              ::testing::HasSubstr(
                  "berth_service_crash_looping{service=\"svc-0\",unit=\"svc-0.service\"} 0\n"
                  "berth_service_crash_looping{service=\"svc-1\",unit=\"svc-1.service\"} 1\n"));
  EXPECT_THAT(text, ::testing::HasSubstr(
                        "berth_service_restarts{service=\"svc-0\",unit=\"svc-0.service\"} 0\n"
                        "berth_service_restarts{service=\"svc-1\",unit=\"svc-1.service\"} 7\n"));
}

TEST(Metrics, TextAfterAnAppliedPassThenAFailedOne) {
  LoopMetrics m;
  m.Record(Pass(Outcome::kApplied, 4, 16'000'000'000, 3, 3), 1700000000.25, 412.5);
  m.Record(Pass(Outcome::kFailed, 2, 1'000, 2, 3), 1700000300.5, 31.25);
  EXPECT_EQ(
      MetricsText(m),
      "# HELP berth_up 1 while the berth reconcile loop runs; 0 once it stopped.\n"
      "# TYPE berth_up gauge\n"
      "berth_up 1\n"
      "# HELP berth_last_run_timestamp_seconds When the last reconcile pass started, in "
      "unix seconds.\n"
      "# TYPE berth_last_run_timestamp_seconds gauge\n"
      "berth_last_run_timestamp_seconds 1700000300.500\n"
      "# HELP berth_last_success_timestamp_seconds When the last successful reconcile pass "
      "started, in unix seconds (0: none yet).\n"
      "# TYPE berth_last_success_timestamp_seconds gauge\n"
      "berth_last_success_timestamp_seconds 1700000000.250\n"
      "# HELP berth_run_duration_seconds How long the last reconcile pass took.\n"
      "# TYPE berth_run_duration_seconds gauge\n"
      "berth_run_duration_seconds 31.250\n"
      "# HELP berth_pending_changes Actions of the last plan that were not applied (0 after "
      "a successful apply).\n"
      "# TYPE berth_pending_changes gauge\n"
      "berth_pending_changes 2\n"
      "# HELP berth_failures_total Reconcile passes that did not succeed, by kind.\n"
      "# TYPE berth_failures_total counter\n"
      "berth_failures_total{kind=\"failed\"} 1\n"
      "berth_failures_total{kind=\"error\"} 0\n"
      "berth_failures_total{kind=\"blocked\"} 0\n"
      "berth_failures_total{kind=\"invalid_manifest\"} 0\n"
      "berth_failures_total{kind=\"stale_plan\"} 0\n"
      "berth_failures_total{kind=\"interrupted\"} 0\n"
      "berth_failures_total{kind=\"held\"} 0\n"
      "# HELP berth_bytes_downloaded_total Bytes of model files downloaded since the loop "
      "started.\n"
      "# TYPE berth_bytes_downloaded_total counter\n"
      "berth_bytes_downloaded_total 16000001000\n"
      "# HELP berth_services_up Services the manifest wants running that were running after "
      "the last pass.\n"
      "# TYPE berth_services_up gauge\n"
      "berth_services_up 2\n"
      "# HELP berth_services_wanted Services the manifest wants running.\n"
      "# TYPE berth_services_wanted gauge\n"
      "berth_services_wanted 3\n"
      "# HELP berth_service_up 1 when the service (a unit the manifest wants running) ran at "
      "the last pass.\n"
      "# TYPE berth_service_up gauge\n"
      "berth_service_up{service=\"svc-0\",unit=\"svc-0.service\"} 1\n"
      "berth_service_up{service=\"svc-1\",unit=\"svc-1.service\"} 1\n"
      "berth_service_up{service=\"svc-2\",unit=\"svc-2.service\"} 0\n"
      "# HELP berth_services_crash_looping Services the manifest wants running whose unit "
      "systemd keeps restarting, or gave up on (not counted in berth_services_up).\n"
      "# TYPE berth_services_crash_looping gauge\n"
      "berth_services_crash_looping 0\n"
      "# HELP berth_change_held 1 while the manifest's change is held: it failed after taking "
      "a service down, and berth waits for the manifest to change or for berth apply "
      "--retry.\n"
      "# TYPE berth_change_held gauge\n"
      "berth_change_held 0\n");
}

TEST(Metrics, EachUnsuccessfulOutcomeCountsUnderItsKind) {
  LoopMetrics m;
  for (Outcome o :
       {Outcome::kFailed, Outcome::kError, Outcome::kError, Outcome::kBlocked, Outcome::kInvalid,
        Outcome::kStale, Outcome::kInterrupted, Outcome::kNotConfirmed, Outcome::kNoChanges})
    m.Record(Pass(o, 0, 0, 0, 0), 1, 1);
  std::string t = MetricsText(m);
  EXPECT_NE(t.find("berth_failures_total{kind=\"failed\"} 1\n"), std::string::npos);
  EXPECT_NE(t.find("berth_failures_total{kind=\"error\"} 3\n"), std::string::npos)
      << "not_confirmed counts as error";
  EXPECT_NE(t.find("berth_failures_total{kind=\"blocked\"} 1\n"), std::string::npos);
  EXPECT_NE(t.find("berth_failures_total{kind=\"invalid_manifest\"} 1\n"), std::string::npos);
  EXPECT_NE(t.find("berth_failures_total{kind=\"stale_plan\"} 1\n"), std::string::npos);
  EXPECT_NE(t.find("berth_failures_total{kind=\"interrupted\"} 1\n"), std::string::npos);
}

TEST(Metrics, PlanOnlyPassReportsItsPendingChangesAndSuccessClearsThem) {
  LoopMetrics m;
  m.Record(Pass(Outcome::kPlanned, 5, 0, 1, 2), 100, 2);
  EXPECT_EQ(m.pending_changes, 5u);
  EXPECT_EQ(m.last_success_timestamp, 100) << "planning is what a plan-only loop is for";
  m.Record(Pass(Outcome::kBlocked, 3, 0, 1, 2), 200, 2);
  EXPECT_EQ(m.pending_changes, 3u);
  EXPECT_EQ(m.last_success_timestamp, 100);
  m.Record(Pass(Outcome::kApplied, 3, 0, 2, 2), 300, 2);
  EXPECT_EQ(m.pending_changes, 0u);
  EXPECT_EQ(m.last_success_timestamp, 300);
}

TEST(Metrics, FileIsReplacedAtomicallyWorldReadableAndNoTemporaryIsLeft) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("berth-metrics-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::string path = (dir / "berth.prom").string();
  std::ofstream(path) << "old\n";
  mode_t old_mask = ::umask(077);
  Status s = WriteFileAtomically(path, "berth_up 1\n");
  ::umask(old_mask);
  ASSERT_TRUE(s.ok()) << s.message();
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), "berth_up 1\n");
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);

  Status bad = WriteFileAtomically((dir / "missing" / "berth.prom").string(), "x");
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("cannot write"), std::string::npos);
  fs::remove_all(dir);
}

TEST(Metrics, TheLastBenchFiguresOfEachModelWithLabels) {
  BenchRecord r;
  r.time = "2026-12-01T10:00:00Z";
  r.service = "vllm-minimax-m25";
  r.served_name = "minimax";
  r.repo_id = "MiniMaxAI/MiniMax-M2.5";
  r.commit = "abc";
  BenchLevel l;
  l.concurrency = 32;
  l.output_tps = 2541.25;
  l.ttft_p50_ms = 120;
  l.ttft_p90_ms = 150;
  l.ttft_p99_ms = 1250;
  l.itl_p50_ms = 12.5;
  l.itl_p90_ms = 13;
  l.itl_p99_ms = 20;
  l.errors = 1;
  r.levels.push_back(l);
  LoopMetrics m;
  EXPECT_EQ(MetricsText(m).find("berth_bench"), std::string::npos);
  m.bench.push_back(r);
  std::string labels =
      "service=\"vllm-minimax-m25\",model=\"MiniMaxAI/MiniMax-M2.5\",commit=\"abc\"";
  EXPECT_EQ(BenchMetricsText(m.bench),
            "# HELP berth_bench_timestamp_seconds When the last berth bench of this service, "
            "model and commit started, in unix seconds.\n"
            "# TYPE berth_bench_timestamp_seconds gauge\n"
            "berth_bench_timestamp_seconds{" +
                labels +
                "} 1796119200\n"
                "# HELP berth_bench_output_tokens_per_second Output tokens per second berth bench "
                "measured at this concurrency.\n"
                "# TYPE berth_bench_output_tokens_per_second gauge\n"
                "berth_bench_output_tokens_per_second{" +
                labels +
                ",concurrency=\"32\"} 2541.250\n"
                "# HELP berth_bench_ttft_seconds Time to first token berth bench measured, by "
                "quantile.\n"
                "# TYPE berth_bench_ttft_seconds gauge\n"
                "berth_bench_ttft_seconds{" +
                labels +
                ",concurrency=\"32\",quantile=\"0.5\"} 0.120000\n"
                "berth_bench_ttft_seconds{" +
                labels +
                ",concurrency=\"32\",quantile=\"0.9\"} 0.150000\n"
                "berth_bench_ttft_seconds{" +
                labels +
                ",concurrency=\"32\",quantile=\"0.99\"} 1.250000\n"
                "# HELP berth_bench_itl_seconds Inter-token latency berth bench measured, by "
                "quantile.\n"
                "# TYPE berth_bench_itl_seconds gauge\n"
                "berth_bench_itl_seconds{" +
                labels +
                ",concurrency=\"32\",quantile=\"0.5\"} 0.012500\n"
                "berth_bench_itl_seconds{" +
                labels +
                ",concurrency=\"32\",quantile=\"0.9\"} 0.013000\n"
                "berth_bench_itl_seconds{" +
                labels +
                ",concurrency=\"32\",quantile=\"0.99\"} 0.020000\n"
                "# HELP berth_bench_errors Requests that failed in the last berth bench.\n"
                "# TYPE berth_bench_errors gauge\n"
                "berth_bench_errors{" +
                labels + ",concurrency=\"32\"} 1\n");
  EXPECT_NE(MetricsText(m).find("berth_bench_errors{"), std::string::npos);
  r.service = "a\"b\\c\nd";
  EXPECT_NE(BenchMetricsText({r}).find("service=\"a\\\"b\\\\c\\nd\""), std::string::npos);
}

// vllm bench serve's figures reach /metrics for the levels that measured them.
TEST(Metrics, TheBenchFiguresOfVllmBenchServeWhereTheyWereMeasured) {
  BenchRecord r;
  r.time = "2026-12-01T10:00:00Z";
  r.service = "svc";
  r.repo_id = "org/m";
  r.commit = "abc";
  BenchLevel old;  // recorded before TPOT was measured
  old.concurrency = 1;
  BenchLevel l;
  l.concurrency = 32;
  l.has_request_figures = true;
  l.request_tps = 9.5;
  l.tpot_p50_ms = 25;
  l.tpot_p90_ms = 30;
  l.tpot_p99_ms = 45.5;
  l.e2e_p50_ms = 6500;
  l.e2e_p90_ms = 7000;
  l.e2e_p99_ms = 9000;
  l.has_goodput = true;
  l.goodput_rps = 8.25;
  r.levels = {old, l};
  std::string text = BenchMetricsText({r});
  std::string labels = "service=\"svc\",model=\"org/m\",commit=\"abc\",concurrency=\"32\"";
  for (const std::string& line :
       {"berth_bench_tpot_seconds{" + labels + ",quantile=\"0.5\"} 0.025000\n",
        "berth_bench_tpot_seconds{" + labels + ",quantile=\"0.99\"} 0.045500\n",
        "berth_bench_e2e_latency_seconds{" + labels + ",quantile=\"0.9\"} 7.000000\n",
        "berth_bench_requests_per_second{" + labels + "} 9.500\n",
        "berth_bench_goodput_requests_per_second{" + labels + "} 8.250\n",
        std::string("# TYPE berth_bench_tpot_seconds gauge\n")})
    EXPECT_NE(text.find(line), std::string::npos) << line << "\nin:\n" << text;
  EXPECT_EQ(text.find("berth_bench_tpot_seconds{service=\"svc\",model=\"org/m\",commit=\"abc\","
                      "concurrency=\"1\""),
            std::string::npos)
      << "a level without the figures shows none";
}

}  // namespace
}  // namespace berth::testing

namespace berth {
namespace {

// The fronts' counters join the textfile: whether each answered, its requests, 5xx, the
// seconds requests spent held (the hold server's sessions) and the server routed to.
TEST(FrontMetrics, EachFrontsCountersAndItsRouteAreInTheTextfile) {
  LoopMetrics m;
  FrontMetrics up;
  up.port = 8000;
  up.stats.requests = 1234;
  up.stats.responses_5xx = 2;
  up.stats.retries = 42;
  up.stats.servers = {{"svc-a", "MAINT", 1, 10, 0, 0, 0, 0},
                      {"svc-b", "no check", 3, 20, 0, 0, 0, 0},
                      {"hold", "MAINT", 0, 40, 0, 0, 0, 0}};
  FrontMetrics down;
  down.port = 9000;
  down.error = "cannot reach /run/fronts/9000.sock";
  m.fronts = {up, down};
  std::string text = MetricsText(m);
  EXPECT_THAT(text, ::testing::HasSubstr("berth_front_up{port=\"8000\"} 1\n"));
  EXPECT_THAT(text, ::testing::HasSubstr("berth_front_up{port=\"9000\"} 0\n"));
  EXPECT_THAT(text, ::testing::HasSubstr("berth_front_requests_total{port=\"8000\"} 1234\n"));
  EXPECT_THAT(text, ::testing::HasSubstr("berth_front_responses_5xx_total{port=\"8000\"} 2\n"));
  EXPECT_THAT(text, ::testing::HasSubstr("berth_front_held_seconds_total{port=\"8000\"} 40\n"));
  EXPECT_THAT(text, ::testing::HasSubstr("berth_front_retries_total{port=\"8000\"} 42\n"));
  EXPECT_THAT(text,
              ::testing::HasSubstr("berth_front_backend{port=\"8000\",server=\"svc-b\"} 1\n"));
  EXPECT_THAT(text,
              ::testing::HasSubstr("berth_front_backend{port=\"8000\",server=\"svc-a\"} 0\n"));
  EXPECT_THAT(text,
              ::testing::Not(::testing::HasSubstr("berth_front_requests_total{port=\"9000\"}")));
  EXPECT_EQ(FrontMetricsText({}), "");
}

}  // namespace
}  // namespace berth
