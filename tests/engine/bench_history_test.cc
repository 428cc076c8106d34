// berth bench's records in the state directory (bench.json) and the comparison view.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "engine/output/bench_text.h"
#include "engine/state/bench_history.h"

namespace berth {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;

BenchRecord Record(const std::string& service, const std::string& repo, const std::string& commit,
                   std::vector<std::pair<int, double>> tps) {
  BenchRecord r;
  r.time = "2026-12-01T10:00:00Z";
  r.service = service;
  r.served_name = service.substr(5);
  r.model = service.substr(5);
  r.repo_id = repo;
  r.commit = commit;
  r.engine = "vllm";
  r.prompt_tokens = 128;
  r.max_tokens = 256;
  r.duration_s = 30;
  for (auto [c, t] : tps) {
    BenchLevel l;
    l.concurrency = c;
    l.requests = 10;
    l.output_tokens = static_cast<uint64_t>(t * 30);
    l.seconds = 30;
    l.output_tps = t;
    l.ttft_p50_ms = 120;
    l.ttft_p90_ms = 180;
    l.ttft_p99_ms = 1250;
    l.itl_p50_ms = 1000 / t * c;
    l.itl_p90_ms = l.itl_p50_ms;
    l.itl_p99_ms = l.itl_p50_ms * 2;
    r.levels.push_back(l);
  }
  return r;
}

class BenchHistoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("berth-bench-history-" + std::to_string(std::random_device{}()));
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(BenchHistoryTest, RecordsRoundTripOldestFirst) {
  BenchHistory h(dir_.string());
  auto none = h.Load();
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  BenchRecord kimi =
      Record("vllm-kimi-k25", "moonshotai/Kimi-K2.5", std::string(40, 'a'), {{1, 61}, {128, 1239}});
  kimi.levels[0].first_error = "POST http://127.0.0.1:8000/v1/completions: HTTP 500: boom";
  ASSERT_TRUE(h.Append(kimi).ok());
  ASSERT_TRUE(h.Append(Record("vllm-minimax-m25", "MiniMaxAI/MiniMax-M2.5", std::string(40, 'b'),
                              {{1, 84}}))
                  .ok());
  auto loaded = h.Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  ASSERT_EQ(loaded->size(), 2u);
  EXPECT_EQ(BenchRecordToJson((*loaded)[0]), BenchRecordToJson(kimi));
  EXPECT_EQ((*loaded)[1].service, "vllm-minimax-m25");
}

TEST_F(BenchHistoryTest, KeepsTheNewestRecordsOnly) {
  BenchHistory h(dir_.string());
  for (size_t i = 0; i < kBenchRecordsKept + 3; ++i)
    ASSERT_TRUE(h.Append(Record("vllm-s" + std::to_string(i), "o/m", "", {{1, 1}})).ok());
  auto loaded = h.Load();
  ASSERT_TRUE(loaded.ok());
  ASSERT_EQ(loaded->size(), kBenchRecordsKept);
  EXPECT_EQ(loaded->front().service, "vllm-s3");
}

TEST_F(BenchHistoryTest, ADamagedFileIsAnErrorNamingIt) {
  std::filesystem::create_directories(dir_);
  BenchHistory h(dir_.string());
  const char* damaged[] = {
      "{not json", R"({"version": 2, "records": []})",
      R"({"version": 1, "records": [{"service": "x"}]})",
      R"({"version": 1, "records": [{"time":"t","service":"s","served_name":"s","model":"m",
          "repo_id":"o/m","commit":"","engine":"vllm","chat":false,"prompt_tokens":1,
          "max_tokens":1,"duration_seconds":1,"levels":[{"concurrency":1,"requests":1,
          "errors":0,"output_tokens":1,"seconds":1,"output_tokens_per_second":-5,
          "ttft_p50_ms":0,"ttft_p90_ms":0,"ttft_p99_ms":0,"itl_p50_ms":0,"itl_p90_ms":0,
          "itl_p99_ms":0,"first_error":""}]}]})"};
  for (const char* text : damaged) {
    std::ofstream(h.path()) << text;
    auto r = h.Load();
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_THAT(r.status().message(), HasSubstr(h.path()));
    EXPECT_FALSE(h.Append(Record("vllm-x", "o/m", "", {{1, 1}})).ok());  // never overwritten
  }
}

// bench.json a FIFO, bench.lock a link: refused naming the file, no read that blocks, and the
// link's target is never opened for writing.
TEST_F(BenchHistoryTest, AFifoOrALinkInTheStateDirectoryIsRefusedNamingIt) {
  std::filesystem::create_directories(dir_);
  BenchHistory h(dir_.string());
  ASSERT_EQ(::mkfifo(h.path().c_str(), 0600), 0);
  auto r = h.Load();
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr(h.path() + " is not a regular file (it is a FIFO)"));
  std::filesystem::remove(h.path());
  std::string victim = (dir_ / "victim").string();
  std::ofstream(victim) << "precious";
  std::filesystem::create_symlink(victim, dir_ / "bench.lock");
  Status s = h.Append(Record("vllm-x", "o/m", "", {{1, 1}}));
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr((dir_ / "bench.lock").string() + " is a symbolic link"));
  EXPECT_FALSE(std::filesystem::exists(h.path())) << "nothing recorded without the lock";
}

TEST(BenchCompare, TheNewestRecordOfEachModelSideBySide) {
  std::vector<BenchRecord> records = {
      Record("vllm-kimi-k25", "moonshotai/Kimi-K2.5", std::string(40, 'a'), {{1, 50}, {128, 1000}}),
      Record("vllm-kimi-k25", "moonshotai/Kimi-K2.5", std::string(40, 'a'), {{1, 61}, {128, 1239}}),
      Record("vllm-minimax-m25", "MiniMaxAI/MiniMax-M2.5", std::string(40, 'b'),
             {{1, 84}, {32, 2541}})};
  auto columns = LatestPerKey(records, {});
  ASSERT_EQ(columns.size(), 2u);
  EXPECT_EQ(columns[0].levels[0].output_tps, 61);
  EXPECT_EQ(BenchCompareText(columns),
            "service             vllm-kimi-k25          vllm-minimax-m25\n"
            "model               moonshotai/Kimi-K2.5   MiniMaxAI/MiniMax-M2.5\n"
            "commit              aaaaaaaaaaaa           bbbbbbbbbbbb\n"
            "measured            2026-12-01T10:00:00Z   2026-12-01T10:00:00Z\n"
            "output tok/s @1                     61.0                     84.0\n"
            "output tok/s @32                       -                     2541\n"
            "output tok/s @128                   1239                        -\n"
            "TTFT p50 @1                       120 ms                   120 ms\n"
            "TTFT p99 @1                       1.25 s                   1.25 s\n"
            "TTFT p50 @32                           -                   120 ms\n"
            "TTFT p99 @32                           -                   1.25 s\n"
            "TTFT p50 @128                     120 ms                        -\n"
            "TTFT p99 @128                     1.25 s                        -\n"
            "ITL p50 @1                       16.4 ms                  11.9 ms\n"
            "ITL p99 @1                       32.8 ms                  23.8 ms\n"
            "ITL p50 @32                            -                  12.6 ms\n"
            "ITL p99 @32                            -                  25.2 ms\n"
            "ITL p50 @128                      103 ms                        -\n"
            "ITL p99 @128                      207 ms                        -\n"
            "errors @1                              0                        0\n"
            "errors @32                             -                        0\n"
            "errors @128                            0                        -\n");
  EXPECT_EQ(LatestPerKey(records, {"vllm-minimax-m25"}).size(), 1u);
  EXPECT_THAT(BenchCompareText({}), HasSubstr("no benchmark recorded yet"));
}

TEST(BenchText, ARunsTableAndItsFirstError) {
  BenchRecord r =
      Record("vllm-kimi-k25", "moonshotai/Kimi-K2.5", std::string(40, 'a'), {{1, 61}, {128, 1239}});
  r.levels[1].errors = 2;
  r.levels[1].first_error = "POST http://127.0.0.1:8000/v1/completions: HTTP 500: boom";
  EXPECT_EQ(BenchHeaderText(r, "127.0.0.1:8000"),
            "berth bench vllm-kimi-k25: moonshotai/Kimi-K2.5@aaaaaaaaaaaa served as 'kimi-k25' "
            "on 127.0.0.1:8000\n"
            "completions, streamed; prompt 128 words, max 256 tokens; 30 s per concurrency\n");
  EXPECT_EQ(BenchLevelsText(r),
            "concurrency   requests   errors   output tok/s    TTFT p50    TTFT p99    ITL p50"
            "    ITL p99\n"
            "          1         10        0           61.0      120 ms      1.25 s    16.4 ms"
            "    32.8 ms\n"
            "        128         10        2           1239      120 ms      1.25 s     103 ms"
            "     207 ms\n"
            "concurrency 128: 2 failed requests; the first: POST "
            "http://127.0.0.1:8000/v1/completions: HTTP 500: boom\n");
}

// A record written before berth measured vLLM's figures (no TPOT, E2E, req/s, goodput) still
// loads, shows "-" for them, and is written back as it was.
TEST_F(BenchHistoryTest, ARecordWithoutTheRequestFiguresStillLoads) {
  std::filesystem::create_directories(dir_);
  BenchHistory h(dir_.string());
  std::ofstream(h.path()) << R"({"version": 1, "records": [{"time":"t","service":"vllm-s",
      "served_name":"s","model":"m","repo_id":"o/m","commit":"","engine":"vllm","chat":false,
      "prompt_tokens":1,"max_tokens":1,"duration_seconds":1,"levels":[{"concurrency":1,
      "requests":1,"errors":0,"output_tokens":1,"seconds":1,"output_tokens_per_second":5,
      "ttft_p50_ms":1,"ttft_p90_ms":1,"ttft_p99_ms":1,"itl_p50_ms":1,"itl_p90_ms":1,
      "itl_p99_ms":1,"first_error":""}]}]})";
  auto r = h.Load();
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->size(), 1u);
  const BenchLevel& l = (*r)[0].levels[0];
  EXPECT_FALSE(l.has_request_figures);
  EXPECT_FALSE(l.has_goodput);
  EXPECT_EQ(l.server_requests, 0u);
  EXPECT_EQ((*r)[0].num_prompts, 0u);
  EXPECT_EQ(BenchCompareText(*r).find("TPOT"), std::string::npos);
  EXPECT_EQ(BenchLevelsText((*r)[0]).find("TPOT"), std::string::npos);
  // Beside a record that has them, it shows "-".
  BenchRecord now = Record("vllm-t", "o/t", "", {{1, 10}});
  now.levels[0].has_request_figures = true;
  now.levels[0].tpot_p50_ms = 20;
  EXPECT_THAT(BenchCompareText({(*r)[0], now}), ContainsRegex("TPOT p50 @1 +- +20.0 ms"));
  auto json = nlohmann::json::parse(BenchRecordToJson((*r)[0]));
  EXPECT_FALSE(json["levels"][0].contains("tpot_p50_ms"));
}

TEST_F(BenchHistoryTest, TheRequestFiguresAndGoodputRoundTrip) {
  BenchRecord r = Record("vllm-kimi-k25", "moonshotai/Kimi-K2.5", std::string(40, 'a'), {{8, 400}});
  r.num_prompts = 200;
  r.request_rate = 4.5;
  r.seed = 7;
  r.warmup = "10";
  r.goodput_ttft_ms = 500;
  r.goodput_tpot_ms = 50;
  BenchLevel& l = r.levels[0];
  l.has_request_figures = true;
  l.request_tps = 1.75;
  l.tpot_mean_ms = 21;
  l.tpot_p50_ms = 20;
  l.tpot_p90_ms = 30;
  l.tpot_p99_ms = 45;
  l.e2e_p50_ms = 5100;
  l.e2e_p90_ms = 6000;
  l.e2e_p99_ms = 7000;
  l.user_tps_p50 = 50;
  l.has_goodput = true;
  l.good_requests = 190;
  l.goodput_rps = 1.5;
  l.server_requests = 9;  // llama.cpp's timings came with 9 of the 10
  l.server_output_tokens = 11990;
  l.server_decode_ms = 241000.5;
  l.server_tpot_mean_ms = 20.25;
  BenchHistory h(dir_.string());
  ASSERT_TRUE(h.Append(r).ok());
  auto loaded = h.Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  EXPECT_EQ(BenchRecordToJson((*loaded)[0]), BenchRecordToJson(r));
  EXPECT_EQ((*loaded)[0].levels[0].good_requests, 190u);
  EXPECT_EQ((*loaded)[0].levels[0].server_output_tokens, 11990u);
  EXPECT_EQ(BenchHeaderText(r, "h:1"),
            "berth bench vllm-kimi-k25: moonshotai/Kimi-K2.5@aaaaaaaaaaaa served as 'kimi-k25' "
            "on h:1\n"
            "completions, streamed; prompt 128 words, max 256 tokens; 200 requests per "
            "concurrency, 4.5 requests/s (Poisson), warm-up 10\n");
  std::string text = BenchLevelsText(r);
  EXPECT_THAT(text, HasSubstr("concurrency      req/s   TPOT p50   TPOT p90   TPOT p99    E2E p50"
                              "    E2E p90    E2E p99  tok/s/user  goodput req/s\n"
                              "          8       1.75    20.0 ms    30.0 ms    45.0 ms     5.10 s"
                              "     6.00 s     7.00 s        50.0           1.50\n"));
  EXPECT_THAT(text, HasSubstr("concurrency 8: the server's own account of 9 of 10 requests: 11990 "
                              "output tokens (berth counted 12000), 241000 ms of decode, TPOT "
                              "mean 20.2 ms (berth 21.0 ms)\n"));
  EXPECT_THAT(BenchCompareText(*loaded), ContainsRegex("TPOT p99 @8 +45.0 ms"));
  // A level where no request finished (all cut at the end) has no TPOT or E2E to show.
  r.levels[0].requests = 0;
  EXPECT_THAT(BenchLevelsText(r), ContainsRegex("\n +8 +1.75 +- +- +- +- +- +- +- +1.50\n"));
}

// bench.json is a file on disk and its first errors quote servers: a record holding a byte that is
// not UTF-8 is still saved as JSON, and --compare and the run's table show controls as \xNN.
TEST_F(BenchHistoryTest, ForeignBytesAreSavedAsJsonAndShownEscaped) {
  BenchRecord r = Record("vllm-x\x1b[2J", "org/m\r\n", std::string(40, 'a'), {{1, 61}});
  r.levels[0].errors = 1;
  r.levels[0].first_error =
      "HTTP 500: 'bad \xff\x1b]0;owned\x07 \xc2\x9b"
      "31m'";
  BenchHistory h(dir_.string());
  ASSERT_TRUE(h.Append(r).ok());
  auto loaded = h.Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  ASSERT_EQ(loaded->size(), 1u);
  EXPECT_EQ((*loaded)[0].levels[0].first_error,
            "HTTP 500: 'bad \\xff\x1b]0;owned\x07 \xc2\x9b"
            "31m'");
  std::string shown = BenchCompareText(*loaded) + BenchHeaderText((*loaded)[0], "h:1") +
                      BenchLevelsText((*loaded)[0]);
  EXPECT_THAT(shown, HasSubstr("vllm-x\\x1b[2J"));
  EXPECT_THAT(shown, HasSubstr("org/m\\x0d\\x0a"));
  EXPECT_THAT(shown, HasSubstr("'bad \\xff\\x1b]0;owned\\x07 \\xc2\\x9b31m'"));
  EXPECT_EQ(shown.find_first_of("\x1b\r\x07\xff"), std::string::npos) << shown;
  EXPECT_EQ(shown.find("\xc2\x9b"), std::string::npos) << shown;
  EXPECT_FALSE(nlohmann::json::parse(BenchCompareJson(*loaded), nullptr, false).is_discarded());
}

}  // namespace
}  // namespace berth
