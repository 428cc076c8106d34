// berth tune's report four ways (engine/output/tune_report.h): the plan, the results table, the
// JSON --resume reads back, and the plot. A sweep of minimax on an 8-GPU host: the declared
// tp4, tp8 with expert parallelism (the best), tp16 (infeasible: 16 GPUs on a host of 8) and
// an fp8 KV cache whose health gate failed.
#include "engine/output/tune_report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

namespace berth {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using Verdict = TuneOutcome::Verdict;

TuneFigures Figures(double tps, double ttft_p99, double tpot_p99) {
  TuneFigures f;
  f.requests = 400;
  f.output_tokens = 102400;
  f.seconds = 102400 / tps;
  f.output_tps = tps;
  f.request_tps = tps / 256;
  f.goodput_rps = f.request_tps;
  f.ttft_p50_ms = ttft_p99 / 3;
  f.ttft_p99_ms = ttft_p99;
  f.tpot_p50_ms = tpot_p99 * 0.8;
  f.tpot_p99_ms = tpot_p99;
  f.itl_p50_ms = tpot_p99 * 0.7;
  f.itl_p99_ms = tpot_p99 * 1.4;
  f.e2e_p50_ms = 256 * tpot_p99 * 0.8;
  f.e2e_p99_ms = 256 * tpot_p99 + ttft_p99;
  return f;
}

TuneOutcome Outcome(std::string name, std::vector<TuneSetting> settings, Verdict v) {
  TuneOutcome o;
  o.candidate.name = std::move(name);
  o.candidate.settings = std::move(settings);
  if (!o.candidate.settings.empty()) o.candidate.loc = {"tune.yaml", 9, 5};
  o.verdict = v;
  return o;
}

TuneReport Sweep() {
  TuneReport r;
  r.spec.file = "tune.yaml";
  r.spec.service = "minimax";
  r.spec.load.concurrency = 32;
  r.spec.load.num_prompts = 400;
  r.spec.load.warmup_requests = 16;
  r.spec.objective.ttft_p99_ms = 500;
  r.spec.objective.tpot_p99_ms = 60;
  r.manifest_path = "berth.yaml";
  r.declaring_file = "services/minimax.yaml";
  r.model = "MiniMaxAI/MiniMax-M2.5";
  r.commit = "b968826d9c46dd6066d109eabc6255188de91218";
  r.started = "2026-12-08T09:30:00Z";

  TuneOutcome declared = Outcome("declared", {}, Verdict::kMeasured);
  declared.switch_mode = "none";
  declared.gates = {"health 0.0 s"};
  declared.figures = Figures(2508.2, 420, 38.5);
  declared.meets_limits = true;

  TuneOutcome tp8 = Outcome("tp8-ep",
                            {{"vllm.tensor_parallel_size", "8"},
                             {"vllm.enable_expert_parallel", "true"},
                             {"gpus", "[0, 1, 2, 3, 4, 5, 6, 7]"}},
                            Verdict::kMeasured);
  tp8.switch_mode = "stop-first";
  tp8.dark_expected_ms = 95000;
  tp8.dark_worst_ms = 180000;
  tp8.switch_ms = 88200;
  tp8.gates = {"health 81.4 s", "smoke 1.2 s", "floor 30.0 s"};
  tp8.figures = Figures(4012.4, 310, 24.1);
  tp8.meets_limits = true;

  TuneOutcome tp16 = Outcome("tp16", {{"vllm.tensor_parallel_size", "16"}}, Verdict::kInfeasible);
  tp16.why = "tensor_parallel_size 16 needs 16 GPUs; the host has 8 (GPUs 0-7)";

  TuneOutcome fp8 = Outcome("fp8-kv", {{"vllm.kv_cache_dtype", "fp8"}}, Verdict::kFailed);
  fp8.switch_mode = "stop-first";
  fp8.dark_expected_ms = 95000;
  fp8.dark_worst_ms = 180000;
  fp8.switch_ms = 212000;
  fp8.why =
      "health gate: vllm exited with status 1 after 212 s\n"
      "torch.OutOfMemoryError: CUDA out of memory";

  r.outcomes = {declared, tp8, tp16, fp8};
  r.spec.candidates = {tp8.candidate, tp16.candidate, fp8.candidate};
  r.winner = 1;
  r.ended_on = "declared";
  r.patch =
      "--- services/minimax.yaml\n+++ services/minimax.yaml\n@@ -4,2 +4,4 @@\n"
      "-    gpus: [0, 1, 2, 3]\n+    gpus: [0, 1, 2, 3, 4, 5, 6, 7]\n"
      "+    vllm: {tensor_parallel_size: 8, enable_expert_parallel: true}\n";
  return r;
}

// The same sweep before it runs (berth tune --plan): nothing measured, tp16 refused.
TuneReport Plan() {
  TuneReport r = Sweep();
  for (auto& o : r.outcomes) {
    if (o.verdict != Verdict::kInfeasible) o.verdict = Verdict::kNotRun;
    o.figures.reset();
    o.gates.clear();
    o.switch_ms = 0;
    o.meets_limits = false;
    if (o.verdict == Verdict::kNotRun) o.why.clear();
  }
  r.winner.reset();
  r.patch.clear();
  r.ended_on.clear();
  return r;
}

std::string LineWith(const std::string& text, const std::string& start) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(start, 0) == 0) return line;
  return "(no line starts with '" + start + "')";
}

// Whether python3's XML parser takes `svg` (the exit status of the parse; 0: it does).
int XmlParse(const std::string& svg) {
  char dir[] = "/tmp/tune_plot_XXXXXX";
  if (!mkdtemp(dir)) return -1;
  const std::string path = std::string(dir) + "/plot.svg";
  std::ofstream(path) << svg;
  const std::string cmd =
      "python3 -c 'import sys, xml.dom.minidom; "
      "d = xml.dom.minidom.parse(sys.argv[1]); "
      "sys.exit(d.documentElement.tagName != \"svg\")' " +
      path + " 2>&1";
  const int rc = std::system(cmd.c_str());
  unlink(path.c_str());
  rmdir(dir);
  return rc;
}

// Whether a coordinate or a tick of `svg` is printf's "nan" or "inf".
bool NotANumber(const std::string& svg) {
  return std::regex_search(svg, std::regex("[\">]-?(nan|inf)[\"<]"));
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(TunePlanText, EachCandidateWithItsSwitchAndDarkWindowThenWhyTheInfeasibleOneIsRefused) {
  const std::string text = TunePlanText(Plan());
  EXPECT_THAT(text, HasSubstr("berth tune minimax: MiniMaxAI/MiniMax-M2.5@b968826d9c46, 4 "
                              "candidates from tune.yaml, started 2026-12-08T09:30:00Z\n"));
  EXPECT_THAT(text, HasSubstr("load: 32 streams, 400 requests; completions, prompt 128 words, "
                              "max 256 tokens, 16 warm-up requests first\n"));
  EXPECT_THAT(text, HasSubstr("best: the highest output tok/s with TTFT p99 <= 500 ms and TPOT "
                              "p99 <= 60.0 ms\n"));
  EXPECT_EQ(LineWith(text, "candidate"),
            "candidate  feasible  switch      dark (expected / worst)  settings");
  EXPECT_EQ(LineWith(text, "declared"),
            "declared   yes       none                           none  (as declared)");
  EXPECT_EQ(LineWith(text, "tp8-ep"),
            "tp8-ep     yes       stop-first               1m35s / 3m  "
            "vllm.tensor_parallel_size=8 vllm.enable_expert_parallel=true "
            "gpus=[0, 1, 2, 3, 4, 5, 6, 7]");
  EXPECT_EQ(LineWith(text, "tp16"),
            "tp16       no        -                                 -  "
            "vllm.tensor_parallel_size=16");
  EXPECT_EQ(LineWith(text, "fp8-kv"),
            "fp8-kv     yes       stop-first               1m35s / 3m  vllm.kv_cache_dtype=fp8");
  EXPECT_THAT(text,
              HasSubstr("\ninfeasible (refused before anything stops):\n  tp16: "
                        "tensor_parallel_size 16 needs 16 GPUs; the host has 8 (GPUs 0-7)\n"));
  EXPECT_THAT(text, HasSubstr("\n3 of 4 feasible: berth tune without --plan"));
}

TEST(TuneResultText, TheTableThenTheBestAgainstTheDeclaredThenFailuresAndThePatch) {
  const std::string text = TuneResultText(Sweep());
  EXPECT_EQ(LineWith(text, "candidate"),
            "candidate  verdict     gates               output tok/s  req/s  TTFT p50  TTFT p99  "
            "TPOT p50  TPOT p99  E2E p99  switch  dark planned  limits");
  EXPECT_EQ(LineWith(text, "declared "),
            "declared   measured    health                      2508   9.80    140 ms    420 ms   "
            "30.8 ms   38.5 ms  10.28 s       -          none  met");
  EXPECT_EQ(LineWith(text, "tp8-ep "),
            "tp8-ep     best        health,smoke,floor          4012  15.67    103 ms    310 ms   "
            "19.3 ms   24.1 ms   6.48 s   1m28s    1m35s / 3m  met");
  EXPECT_EQ(LineWith(text, "tp16 "),
            "tp16       infeasible  -                              -      -         -         -  "
            "       -         -        -       -             -  -");
  EXPECT_EQ(LineWith(text, "fp8-kv "),
            "fp8-kv     failed      -                              -      -         -         -  "
            "       -         -        -   3m32s    1m35s / 3m  -");
  EXPECT_THAT(text, HasSubstr("\nsettings:\n  declared  (as declared)\n  tp8-ep    "
                              "vllm.tensor_parallel_size=8 vllm.enable_expert_parallel=true"));
  EXPECT_THAT(text, HasSubstr("\nbest: tp8-ep, 4,012 output tok/s, 1.6x the declared "
                              "configuration (2,508 output tok/s)\n"));
  EXPECT_THAT(text,
              HasSubstr("\nfailed (each switch undone: the configuration before it ran again):\n"
                        "  fp8-kv: health gate: vllm exited with status 1 after 212 s\n"
                        "          torch.OutOfMemoryError: CUDA out of memory\n"));
  EXPECT_THAT(text, HasSubstr("\ninfeasible (refused before anything stopped):\n  tp16: "
                              "tensor_parallel_size 16 needs 16 GPUs; the host has 8"));
  EXPECT_THAT(text, HasSubstr("\nthe host runs the declared configuration\n"));
  EXPECT_THAT(text, HasSubstr("\nto keep it, commit this change of services/minimax.yaml:\n"
                              "--- services/minimax.yaml\n"));
  EXPECT_THAT(text, HasSubstr("+    vllm: {tensor_parallel_size: 8, enable_expert_parallel: "
                              "true}\n"));
}

TEST(TuneResultText, NoCandidateMetTheLimitsSaysWhatEachMissed) {
  TuneReport r = Sweep();
  r.outcomes[0].meets_limits = false;
  r.outcomes[0].missed = "TTFT p99 612 ms > 500 ms";
  r.outcomes[1].meets_limits = false;
  r.outcomes[1].missed = "TPOT p99 71.0 ms > 60.0 ms";
  r.winner.reset();
  r.patch.clear();
  const std::string text = TuneResultText(r);
  EXPECT_THAT(text, HasSubstr("\nno candidate met the limits: declared (TTFT p99 612 ms > 500 "
                              "ms); tp8-ep (TPOT p99 71.0 ms > 60.0 ms)\n"));
  EXPECT_THAT(LineWith(text, "tp8-ep "), HasSubstr("  missed: TPOT p99 71.0 ms > 60.0 ms"));
  EXPECT_THAT(text, Not(HasSubstr("best: tp8-ep")));
  EXPECT_THAT(text, Not(HasSubstr("to keep it")));

  for (auto& o : r.outcomes) o.figures.reset();
  EXPECT_THAT(TuneResultText(r), HasSubstr("\nno candidate was measured\n"));
}

TEST(TuneResultText, TheDeclaredConfigurationBestMeansNothingToChange) {
  TuneReport r = Sweep();
  r.outcomes[1].figures->output_tps = 1900;
  r.winner = 0;
  r.patch.clear();
  const std::string text = TuneResultText(r);
  EXPECT_THAT(text, HasSubstr("\nbest: declared, 2,508 output tok/s: the declared configuration "
                              "is already the best; nothing to change\n"));
  EXPECT_EQ(LineWith(text, "declared ").substr(0, 20), "declared   best     ");
}

TEST(TuneResultText, GoodputWinnerAndResumedFiguresAndTheKeptWinner) {
  TuneReport r = Sweep();
  r.spec.objective.maximize = TuneObjective::Metric::kGoodput;
  r.outcomes[0].resumed = true;
  r.outcomes[1].figures->errors = 2;
  r.outcomes[1].figures->first_error = "HTTP 503: engine overloaded";
  r.ended_on = "winner";
  const std::string text = TuneResultText(r);
  EXPECT_THAT(text, HasSubstr("best: the highest goodput (requests/s within the limits) with"));
  EXPECT_THAT(text, HasSubstr("\nbest: tp8-ep, 15.67 good req/s, 1.6x the declared "
                              "configuration (9.80 good req/s)\n"));
  EXPECT_EQ(LineWith(text, "declared ").substr(0, 21), "declared   measured* ");
  EXPECT_THAT(text, HasSubstr("\n* measured by an earlier run (--resume), not again now\n"));
  EXPECT_THAT(text, HasSubstr("\ntp8-ep: 2 failed requests; the first: HTTP 503: engine "
                              "overloaded\n"));
  EXPECT_THAT(text, HasSubstr("\nthe host runs the best, tp8-ep (--keep-winner)\n"));
}

// Names, settings, reasons and the patch are text from the tune file or a server: none moves
// the reader's cursor or starts a line of its own.
TEST(TuneReportText, HostileTextIsEscapedOnOneLine) {
  TuneReport r = Sweep();
  r.outcomes[1].candidate.name = "tp8\x1b]0;owned\x07\nbest: fake";
  r.outcomes[1].candidate.settings[0].value = "8\r\x1b[2J";
  r.outcomes[3].why = "oom\x1b[31m red";
  r.ended_on =
      "elsewhere\x9b"
      "2J";
  r.patch += "+  x: \x1b[1m\n";
  for (const std::string& text : {TuneResultText(r), TunePlanText(r)}) {
    EXPECT_EQ(text.find('\x1b'), std::string::npos) << text;
    EXPECT_EQ(text.find('\r'), std::string::npos);
    EXPECT_EQ(text.find("\nbest: fake"), std::string::npos);
    EXPECT_THAT(text, HasSubstr("tp8\\x1b]0;owned\\x07\\x0abest: fake"));
  }
  EXPECT_THAT(TuneResultText(r), HasSubstr("fp8-kv: oom\\x1b[31m red"));
}

TEST(TuneReportJson, EveryFieldWrittenAndReadBack) {
  const TuneReport r = Sweep();
  const std::string text = TuneReportJson(r);
  const nlohmann::json j = nlohmann::json::parse(text);
  EXPECT_EQ(j["format"], 1);
  EXPECT_EQ(j["winner"], 1);
  EXPECT_EQ(j["outcomes"][2]["verdict"], "infeasible");
  EXPECT_EQ(j["outcomes"][3]["verdict"], "failed");
  EXPECT_TRUE(j["outcomes"][2]["figures"].is_null());
  EXPECT_EQ(j["outcomes"][1]["figures"]["output_tokens_per_second"], 4012.4);
  EXPECT_EQ(j["outcomes"][1]["figures"]["ttft_p99_ms"], 310);
  EXPECT_EQ(j["outcomes"][1]["dark_worst_ms"], 180000);
  EXPECT_EQ(j["spec"]["objective"]["maximize"], "output_tokens_per_second");
  EXPECT_EQ(j["spec"]["candidates"][0]["settings"][0]["path"], "vllm.tensor_parallel_size");

  Result<TuneReport> back = TuneReportFromJson(text);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_TRUE(*back == r);
  EXPECT_EQ(TuneReportJson(*back), text);
}

// A report with no field at its default: every one survives the trip.
TEST(TuneReportJson, EveryFieldSetSurvivesTheTrip) {
  TuneReport r = Sweep();
  r.spec.baseline = false;
  r.spec.load = {64, 0, 45000, 12.5, 7, 512, 1024, 32, true};
  r.spec.objective = {TuneObjective::Metric::kGoodput, 800, 45.5, 30000};
  r.spec.candidates[1].loc = {"tune.d/more.yaml", 3, 7};
  r.outcomes[0].resumed = true;
  r.outcomes[1].figures->errors = 3;
  r.outcomes[1].figures->first_error = "HTTP 500: \"boom\" \xe2\x9c\x97";
  r.outcomes[1].missed = "E2E p99 31.0 s > 30.0 s";
  r.outcomes[2].verdict = Verdict::kNotRun;
  r.outcomes[3].gates = {"health 212 s"};
  r.ended_on = "neither: the undo of fp8-kv failed";
  Result<TuneReport> back = TuneReportFromJson(TuneReportJson(r));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_TRUE(*back == r);

  const TuneReport empty;
  Result<TuneReport> none = TuneReportFromJson(TuneReportJson(empty));
  ASSERT_TRUE(none.ok()) << none.status().message();
  EXPECT_TRUE(*none == empty);
}

// An edit of the saved report is refused by the key it broke.
TEST(TuneReportJson, AReportThatIsNotOneBerthWroteIsRefusedByItsKey) {
  const nlohmann::json good = nlohmann::json::parse(TuneReportJson(Sweep()));
  struct Case {
    std::function<void(nlohmann::json&)> edit;
    std::string says;
  };
  const std::vector<Case> cases = {
      {[](auto& j) { j["outcomes"][1]["figures"]["ttft_p99_ms"] = "fast"; },
       "outcomes[1].figures.ttft_p99_ms must be a number >= 0 (it is string)"},
      {[](auto& j) { j["outcomes"][1]["figures"]["ttft_p99_ms"] = -1; },
       "outcomes[1].figures.ttft_p99_ms must be a number >= 0"},
      {[](auto& j) { j["spec"]["load"].erase("seed"); }, "spec.load.seed is missing"},
      {[](auto& j) { j["outcomes"][0]["extra"] = 1; },
       "outcomes[0].extra is not a key berth writes"},
      {[](auto& j) { j["outcomes"][2]["verdict"] = "great"; },
       "outcomes[2].verdict must be measured, infeasible, failed or not_run, not 'great'"},
      {[](auto& j) { j["outcomes"][1]["gates"][0] = 1; }, "outcomes[1].gates[0] must be a string"},
      {[](auto& j) { j["outcomes"][1]["candidate"]["settings"][0]["value"] = 8; },
       "outcomes[1].candidate.settings[0].value must be a string (it is number)"},
      {[](auto& j) { j["spec"]["candidates"][0]["loc"] = nullptr; },
       "spec.candidates[0].loc must be an object (it is null)"},
      {[](auto& j) { j["spec"]["load"]["concurrency"] = -3; },
       "spec.load.concurrency must be an integer from 1 to 2147483647"},
      {[](auto& j) { j["spec"]["load"]["concurrency"] = 10000000000ULL; },
       "spec.load.concurrency must be an integer from 1 to 2147483647"},
      {[](auto& j) { j["spec"]["load"]["num_prompts"] = 1.5; },
       "spec.load.num_prompts must be an integer >= 0 (it is number)"},
      {[](auto& j) { j["spec"]["objective"]["maximize"] = "vibes"; },
       "spec.objective.maximize must be output_tokens_per_second or goodput, not 'vibes'"},
      {[](auto& j) { j["spec"]["baseline"] = "yes"; }, "spec.baseline must be true or false"},
      {[](auto& j) { j["winner"] = 9; }, "winner must be null or the index of one of the 4"},
      {[](auto& j) { j["winner"] = 2; }, "winner names outcomes[2], which has no figures"},
      {[](auto& j) { j["format"] = 2; }, "format 2 is not one this berth reads (it reads 1)"},
      {[](auto& j) { j.erase("format"); }, "format is missing"},
      {[](auto& j) { j = nlohmann::json::array(); },
       "the document must be an object (it is array)"},
  };
  for (const Case& c : cases) {
    nlohmann::json j = good;
    c.edit(j);
    Result<TuneReport> r = TuneReportFromJson(j.dump());
    ASSERT_FALSE(r.ok()) << c.says;
    EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr("tune report: " + c.says));
  }
  EXPECT_THAT(TuneReportFromJson("{\"format\": 1,").status().message(), HasSubstr("not JSON"));
  EXPECT_THAT(TuneReportFromJson(std::string(100000, '[')).status().message(),
              HasSubstr("nests deeper than 16 levels"));
  EXPECT_THAT(TuneReportFromJson(std::string((16 << 20) + 1, ' ')).status().message(),
              HasSubstr("more than the 16777216 berth reads"));
}

// Whatever is cut off a report, reading it returns a Status; nothing throws.
TEST(TuneReportJson, EveryPrefixOfAReportIsRefusedWithoutThrowing) {
  const std::string text = TuneReportJson(Sweep());
  for (size_t n = 0; n < text.rfind('}'); ++n) {
    Result<TuneReport> r(Status::Internal("not read"));
    EXPECT_NO_THROW(r = TuneReportFromJson(std::string_view(text).substr(0, n))) << n;
    EXPECT_FALSE(r.ok()) << n;
  }
}

TEST(TunePlotSvg, ThroughputAgainstTtftWithTheBestTheLimitAndTheMissing) {
  const std::string svg = TunePlotSvg(Sweep());
  EXPECT_EQ(XmlParse(svg), 0) << svg;
  EXPECT_EQ(svg.rfind("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/"
                      "2000/svg\" version=\"1.1\"",
                      0),
            0u);
  EXPECT_THAT(svg, HasSubstr(">berth tune minimax: MiniMaxAI/MiniMax-M2.5@b968826d9c46</text>"));
  EXPECT_EQ(Count(svg, "</circle>"), 2u);                   // a point per measured candidate
  EXPECT_THAT(svg, HasSubstr("r=\"8\" fill=\"#ff7f0e\""));  // the best, highlighted
  EXPECT_THAT(svg, HasSubstr("font-weight=\"bold\">tp8-ep (best)</text>"));
  EXPECT_THAT(svg, HasSubstr(">declared</text>"));
  EXPECT_THAT(svg, HasSubstr("stroke-dasharray=\"6 4\""));
  EXPECT_THAT(svg, HasSubstr(">TTFT p99 limit 500 ms</text>"));
  EXPECT_THAT(svg, HasSubstr(">TTFT p99 (ms)</text>"));
  EXPECT_THAT(svg, HasSubstr(">output (tok/s)</text>"));
  for (const char* tick : {">0<", ">100<", ">500<", ">600<", ">1,000<", ">5,000<"})
    EXPECT_THAT(svg, HasSubstr(tick));
  EXPECT_THAT(svg, HasSubstr(">failed: fp8-kv (health gate: vllm exited with status 1 after 212 "
                             "s...)</text>"));
  EXPECT_THAT(svg, HasSubstr(">infeasible: tp16 (tensor_parallel_size 16 needs 16 GPUs"));
  EXPECT_THAT(svg, HasSubstr(">limits not on this axis: TPOT p99 \u2264 60.0 ms"));
  for (const char* absent : {"<script", "href", "@import", "url("})
    EXPECT_THAT(svg, Not(HasSubstr(absent)));
  EXPECT_FALSE(NotANumber(svg));
  EXPECT_EQ(TunePlotSvg(Sweep()), svg);  // same report, same bytes
}

TEST(TunePlotSvg, TheAxisIsTheLatencyTheObjectiveLimits) {
  TuneReport r = Sweep();
  r.spec.objective.ttft_p99_ms = 0;
  std::string svg = TunePlotSvg(r);
  EXPECT_THAT(svg, HasSubstr(">TPOT p99 (ms)</text>"));
  EXPECT_THAT(svg, HasSubstr(">TPOT p99 limit 60.0 ms</text>"));
  EXPECT_THAT(svg, Not(HasSubstr("limits not on this axis")));

  r.spec.objective.tpot_p99_ms = 0;
  r.outcomes[0].meets_limits = false;  // no limit, yet the sweep said so: drawn hollow
  svg = TunePlotSvg(r);
  EXPECT_EQ(XmlParse(svg), 0);
  EXPECT_THAT(svg, HasSubstr(">TTFT p99 (ms)</text>"));
  EXPECT_THAT(svg, Not(HasSubstr("stroke-dasharray")));
  EXPECT_THAT(svg, HasSubstr(">measured</text>"));
  EXPECT_THAT(svg, HasSubstr(">missed a limit</text>"));
}

// Names are the tune file's text: in the SVG they are text, never markup.
TEST(TunePlotSvg, HostileNamesAreTextNotMarkup) {
  TuneReport r = Sweep();
  const std::string hostile = "<script>alert(\"x\")</script>&'\x1b[31m\xff\xef\xbf\xbf";
  r.spec.service = hostile;
  r.model = hostile;
  r.outcomes[1].candidate.name = hostile;
  r.outcomes[1].missed = hostile;
  r.outcomes[1].meets_limits = false;
  r.outcomes[2].candidate.name = "]]><!--";
  r.outcomes[3].why = hostile;
  const std::string svg = TunePlotSvg(r);
  EXPECT_EQ(XmlParse(svg), 0) << svg;
  EXPECT_THAT(svg, Not(HasSubstr("<script")));
  EXPECT_THAT(svg, Not(HasSubstr("<!--")));
  EXPECT_THAT(svg, HasSubstr("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;&#39;"
                             "\\x1b[31m\\xff\\uFFFF"));
  EXPECT_EQ(svg.find('\x1b'), std::string::npos);
}

TEST(TunePlotSvg, NoneOneEqualAndManyPointsAllDraw) {
  TuneReport none = Sweep();
  for (auto& o : none.outcomes) {
    o.verdict = Verdict::kFailed;
    o.figures.reset();
  }
  none.winner.reset();
  TuneReport one = Sweep();
  one.outcomes.resize(1);
  one.winner = 0;
  TuneReport equal = Sweep();
  equal.outcomes[1].figures = equal.outcomes[0].figures;
  TuneReport zeros = Sweep();
  zeros.spec.objective = {};
  zeros.outcomes[0].figures = TuneFigures{};
  zeros.outcomes[1].figures = TuneFigures{};
  TuneReport many = Sweep();
  for (int i = 0; i < 60; ++i) {
    TuneOutcome o = Outcome("threads=" + std::to_string(i), {{"llama_server.threads", "2"}},
                            i % 3 ? Verdict::kMeasured : Verdict::kInfeasible);
    if (o.verdict == Verdict::kMeasured) o.figures = Figures(100.0 + 50 * i, 90.0 + 7 * i, 20);
    o.meets_limits = i % 2;
    many.outcomes.push_back(o);
  }
  TuneReport empty;
  const std::vector<std::pair<const TuneReport*, size_t>> reports = {
      {&none, 0}, {&one, 1}, {&equal, 2}, {&zeros, 2}, {&many, 42}, {&empty, 0}};
  for (const auto& [r, points] : reports) {
    const std::string svg = TunePlotSvg(*r);
    EXPECT_EQ(XmlParse(svg), 0) << svg;
    EXPECT_EQ(Count(svg, "</circle>"), points);
    EXPECT_FALSE(NotANumber(svg));
    EXPECT_EQ(TunePlotSvg(*r), svg);
  }
  EXPECT_THAT(TunePlotSvg(none), HasSubstr(">no candidate was measured</text>"));
  EXPECT_THAT(TunePlotSvg(many), HasSubstr(">and 11 more not on the plot (see the table)</text>"));
  EXPECT_THAT(TunePlotSvg(many), HasSubstr(" too close to others for a label: the name is in the "
                                           "point's tooltip and the table</text>"));
  EXPECT_THAT(TunePlotSvg(many), HasSubstr("font-weight=\"bold\">tp8-ep (best)</text>"));
}

// docs/tune-plot-example.svg is this plot (BERTH_UPDATE_GOLDEN=1 rewrites it): the sweep above
// with two more candidates, one faster than the best that misses the TTFT limit.
TEST(TunePlotSvg, TheDocsExampleIsThisPlot) {
  TuneReport r = Sweep();
  TuneOutcome mtp = Outcome("tp8-ep-mtp",
                            {{"vllm.tensor_parallel_size", "8"},
                             {"vllm.speculative", "{method: mtp, num_speculative_tokens: 1}"}},
                            Verdict::kMeasured);
  mtp.figures = Figures(4655.0, 640, 21.7);
  mtp.missed = "TTFT p99 640 ms > 500 ms";
  TuneOutcome chunked =
      Outcome("tp4-chunked", {{"vllm.max_num_batched_tokens", "8192"}}, Verdict::kMeasured);
  chunked.figures = Figures(2890.5, 365, 33.0);
  chunked.meets_limits = true;
  r.outcomes.insert(r.outcomes.begin() + 2, mtp);
  r.outcomes.push_back(chunked);
  r.spec.candidates = {r.outcomes[1].candidate, mtp.candidate, r.outcomes[3].candidate,
                       r.outcomes[4].candidate, chunked.candidate};
  const std::string svg = TunePlotSvg(r);
  ASSERT_EQ(XmlParse(svg), 0);
  const std::string path = std::string(BERTH_SOURCE_DIR) + "/docs/tune-plot-example.svg";
  if (std::getenv("BERTH_UPDATE_GOLDEN")) std::ofstream(path) << svg;
  std::ifstream in(path);
  std::stringstream file;
  file << in.rdbuf();
  EXPECT_EQ(file.str(), svg) << "regenerate with BERTH_UPDATE_GOLDEN=1 if intended";
}

}  // namespace
}  // namespace berth
