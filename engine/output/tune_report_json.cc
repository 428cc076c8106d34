// berth tune's report as JSON, and back for --resume: every field, keys in the order written,
// read without exceptions (each key's type and range checked, the first problem named by its
// path, "outcomes[2].figures.ttft_p99_ms").
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "core/json_scan.h"
#include "core/json_text.h"
#include "engine/output/tune_report.h"

namespace berth {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;
using Verdict = TuneOutcome::Verdict;
using Metric = TuneObjective::Metric;

constexpr int kFormat = 1;
constexpr size_t kMaxTextBytes = size_t{16} << 20;
constexpr size_t kMaxDepth = 16;          // the report nests 6 deep
constexpr size_t kMaxCandidates = 10000;  // per sweep
constexpr size_t kMaxItems = 1000;        // settings of a candidate, gates of an outcome

const char* MetricWord(Metric m) {
  return m == Metric::kGoodput ? "goodput" : "output_tokens_per_second";
}

ordered_json CandidateJson(const TuneCandidate& c) {
  ordered_json settings = ordered_json::array();
  for (const auto& s : c.settings) settings.push_back({{"path", s.path}, {"value", s.value}});
  return {{"name", c.name},
          {"settings", settings},
          {"loc", {{"file", c.loc.file}, {"line", c.loc.line}, {"column", c.loc.column}}}};
}

ordered_json FiguresJson(const TuneFigures& f) {
  return {{"requests", f.requests},
          {"errors", f.errors},
          {"output_tokens", f.output_tokens},
          {"seconds", f.seconds},
          {"output_tokens_per_second", f.output_tps},
          {"requests_per_second", f.request_tps},
          {"goodput_requests_per_second", f.goodput_rps},
          {"ttft_p50_ms", f.ttft_p50_ms},
          {"ttft_p99_ms", f.ttft_p99_ms},
          {"tpot_p50_ms", f.tpot_p50_ms},
          {"tpot_p99_ms", f.tpot_p99_ms},
          {"itl_p50_ms", f.itl_p50_ms},
          {"itl_p99_ms", f.itl_p99_ms},
          {"e2e_p50_ms", f.e2e_p50_ms},
          {"e2e_p99_ms", f.e2e_p99_ms},
          {"first_error", f.first_error}};
}

ordered_json OutcomeJson(const TuneOutcome& o) {
  return {{"candidate", CandidateJson(o.candidate)},
          {"verdict", TuneVerdictWord(o.verdict)},
          {"why", o.why},
          {"switch_mode", o.switch_mode},
          {"dark_expected_ms", o.dark_expected_ms},
          {"dark_worst_ms", o.dark_worst_ms},
          {"switch_ms", o.switch_ms},
          {"gates", o.gates},
          {"figures", o.figures ? FiguresJson(*o.figures) : ordered_json(nullptr)},
          {"meets_limits", o.meets_limits},
          {"missed", o.missed},
          {"resumed", o.resumed}};
}

ordered_json SpecJson(const TuneSpec& s) {
  ordered_json candidates = ordered_json::array();
  for (const auto& c : s.candidates) candidates.push_back(CandidateJson(c));
  const TuneLoad& l = s.load;
  const TuneObjective& o = s.objective;
  return {{"file", s.file},
          {"service", s.service},
          {"baseline", s.baseline},
          {"candidates", candidates},
          {"load",
           {{"concurrency", l.concurrency},
            {"num_prompts", l.num_prompts},
            {"duration_ms", l.duration_ms},
            {"request_rate", l.request_rate},
            {"seed", l.seed},
            {"prompt_tokens", l.prompt_tokens},
            {"max_tokens", l.max_tokens},
            {"warmup_requests", l.warmup_requests},
            {"chat", l.chat}}},
          {"objective",
           {{"maximize", MetricWord(o.maximize)},
            {"ttft_p99_ms", o.ttft_p99_ms},
            {"tpot_p99_ms", o.tpot_p99_ms},
            {"e2e_p99_ms", o.e2e_p99_ms}}}};
}

// One object of the report being read: each key taken once with its type and range checked.
// The first problem is kept (with the key's path) and every later call does nothing; Done()
// refuses a key no call took (not of this writer's making).
class Obj {
 public:
  Obj(const json* j, std::string path, std::string* problem)
      : j_(j), path_(std::move(path)), problem_(problem) {
    if (problem_->empty() && (!j_ || !j_->is_object()))
      Fail((path_.empty() ? "the document" : path_) + " must be an object" + Is(j_));
  }

  void Str(const char* key, std::string* out) {
    if (const json* v = Take(key, "a string", &json::is_string))
      *out = v->get_ref<const json::string_t&>();
  }
  void Bool(const char* key, bool* out) {
    if (const json* v = Take(key, "true or false", &json::is_boolean)) *out = v->get<bool>();
  }
  void Count(const char* key, uint64_t* out) {
    if (const json* v = Take(key, "an integer >= 0", &json::is_number_unsigned))
      *out = v->get<uint64_t>();
  }
  void Int(const char* key, int* out, int min) {
    const json* v = Take(key, "an integer", &json::is_number_integer);
    if (!v) return;
    constexpr int64_t kMax = std::numeric_limits<int>::max();
    const bool fits =
        v->is_number_unsigned() ? v->get<uint64_t>() <= uint64_t{kMax} : v->get<int64_t>() >= min;
    if (!fits || v->get<int64_t>() < min)
      return Fail(Path(key) + " must be an integer from " + std::to_string(min) + " to " +
                  std::to_string(kMax));
    *out = static_cast<int>(v->get<int64_t>());
  }
  void Number(const char* key, double* out) {
    const json* v = Take(key, "a number >= 0", &json::is_number);
    if (!v) return;
    const double d = v->get<double>();
    if (!std::isfinite(d) || d < 0) return Fail(Path(key) + " must be a number >= 0");
    *out = d;
  }
  /// The array at `key`, at most `max` items; nullptr after a problem.
  const json* Array(const char* key, size_t max) {
    const json* v = Take(key, "an array", &json::is_array);
    if (v && v->size() > max) {
      Fail(Path(key) + " has " + std::to_string(v->size()) + " items, more than the " +
           std::to_string(max) + " berth reads");
      return nullptr;
    }
    return v;
  }
  /// The value at `key`, of any type (the caller checks it); nullptr after a problem.
  const json* Any(const char* key) { return Take(key, "", nullptr); }

  void Done() {
    if (!problem_->empty()) return;
    for (const auto& [key, v] : j_->items())
      if (!taken_.count(key))
        return Fail(Path(key.substr(0, 80).c_str()) + " is not a key berth writes");
  }

  std::string Path(const char* key) const { return path_.empty() ? key : path_ + "." + key; }
  void Fail(std::string problem) {
    if (problem_->empty()) *problem_ = std::move(problem);
  }

 private:
  static std::string Is(const json* v) {
    return v ? std::string(" (it is ") + (v->is_null() ? "null" : v->type_name()) + ")" : "";
  }
  const json* Take(const char* key, const char* what, bool (json::*is)() const noexcept) {
    if (!problem_->empty()) return nullptr;
    taken_.insert(key);
    auto it = j_->find(key);
    if (it == j_->end()) {
      Fail(Path(key) + " is missing");
      return nullptr;
    }
    if (is && !((*it).*is)()) {
      Fail(Path(key) + " must be " + what + Is(&*it));
      return nullptr;
    }
    return &*it;
  }

  const json* j_;
  std::string path_;
  std::string* problem_;
  std::set<std::string> taken_;
};

TuneCandidate CandidateFrom(const json& j, const std::string& path, std::string* problem) {
  TuneCandidate c;
  Obj o(&j, path, problem);
  o.Str("name", &c.name);
  if (const json* settings = o.Array("settings", kMaxItems)) {
    for (size_t i = 0; i < settings->size() && problem->empty(); ++i) {
      Obj s(&(*settings)[i], o.Path("settings") + "[" + std::to_string(i) + "]", problem);
      TuneSetting& setting = c.settings.emplace_back();
      s.Str("path", &setting.path);
      s.Str("value", &setting.value);
      s.Done();
    }
  }
  Obj loc(o.Any("loc"), o.Path("loc"), problem);
  loc.Str("file", &c.loc.file);
  loc.Int("line", &c.loc.line, 0);
  loc.Int("column", &c.loc.column, 0);
  loc.Done();
  o.Done();
  return c;
}

TuneFigures FiguresFrom(const json& j, const std::string& path, std::string* problem) {
  TuneFigures f;
  Obj o(&j, path, problem);
  o.Count("requests", &f.requests);
  o.Count("errors", &f.errors);
  o.Count("output_tokens", &f.output_tokens);
  o.Number("seconds", &f.seconds);
  o.Number("output_tokens_per_second", &f.output_tps);
  o.Number("requests_per_second", &f.request_tps);
  o.Number("goodput_requests_per_second", &f.goodput_rps);
  o.Number("ttft_p50_ms", &f.ttft_p50_ms);
  o.Number("ttft_p99_ms", &f.ttft_p99_ms);
  o.Number("tpot_p50_ms", &f.tpot_p50_ms);
  o.Number("tpot_p99_ms", &f.tpot_p99_ms);
  o.Number("itl_p50_ms", &f.itl_p50_ms);
  o.Number("itl_p99_ms", &f.itl_p99_ms);
  o.Number("e2e_p50_ms", &f.e2e_p50_ms);
  o.Number("e2e_p99_ms", &f.e2e_p99_ms);
  o.Str("first_error", &f.first_error);
  o.Done();
  return f;
}

TuneOutcome OutcomeFrom(const json& j, const std::string& path, std::string* problem) {
  TuneOutcome out;
  Obj o(&j, path, problem);
  if (const json* c = o.Any("candidate"))
    out.candidate = CandidateFrom(*c, o.Path("candidate"), problem);
  std::string verdict;
  o.Str("verdict", &verdict);
  bool known = false;
  for (Verdict v : {Verdict::kMeasured, Verdict::kInfeasible, Verdict::kFailed, Verdict::kNotRun})
    if (verdict == TuneVerdictWord(v)) {
      out.verdict = v;
      known = true;
    }
  if (!known)
    o.Fail(o.Path("verdict") + " must be measured, infeasible, failed or not_run, not '" +
           verdict.substr(0, 40) + "'");
  o.Str("why", &out.why);
  o.Str("switch_mode", &out.switch_mode);
  o.Count("dark_expected_ms", &out.dark_expected_ms);
  o.Count("dark_worst_ms", &out.dark_worst_ms);
  o.Count("switch_ms", &out.switch_ms);
  if (const json* gates = o.Array("gates", kMaxItems)) {
    for (size_t i = 0; i < gates->size(); ++i) {
      if (!(*gates)[i].is_string()) {
        o.Fail(o.Path("gates") + "[" + std::to_string(i) + "] must be a string");
        break;
      }
      out.gates.push_back((*gates)[i].get_ref<const json::string_t&>());
    }
  }
  if (const json* f = o.Any("figures"); f && !f->is_null())
    out.figures = FiguresFrom(*f, o.Path("figures"), problem);
  o.Bool("meets_limits", &out.meets_limits);
  o.Str("missed", &out.missed);
  o.Bool("resumed", &out.resumed);
  o.Done();
  return out;
}

TuneSpec SpecFrom(const json* j, std::string* problem) {
  TuneSpec s;
  Obj o(j, "spec", problem);
  o.Str("file", &s.file);
  o.Str("service", &s.service);
  o.Bool("baseline", &s.baseline);
  if (const json* candidates = o.Array("candidates", kMaxCandidates))
    for (size_t i = 0; i < candidates->size() && problem->empty(); ++i)
      s.candidates.push_back(CandidateFrom(
          (*candidates)[i], o.Path("candidates") + "[" + std::to_string(i) + "]", problem));
  Obj l(o.Any("load"), o.Path("load"), problem);
  l.Int("concurrency", &s.load.concurrency, 1);
  l.Count("num_prompts", &s.load.num_prompts);
  l.Count("duration_ms", &s.load.duration_ms);
  l.Number("request_rate", &s.load.request_rate);
  l.Count("seed", &s.load.seed);
  l.Int("prompt_tokens", &s.load.prompt_tokens, 0);
  l.Int("max_tokens", &s.load.max_tokens, 0);
  l.Count("warmup_requests", &s.load.warmup_requests);
  l.Bool("chat", &s.load.chat);
  l.Done();
  Obj b(o.Any("objective"), o.Path("objective"), problem);
  std::string maximize;
  b.Str("maximize", &maximize);
  if (maximize == MetricWord(Metric::kGoodput))
    s.objective.maximize = Metric::kGoodput;
  else if (maximize != MetricWord(Metric::kOutputTokensPerSecond))
    b.Fail(b.Path("maximize") + " must be output_tokens_per_second or goodput, not '" +
           maximize.substr(0, 40) + "'");
  b.Number("ttft_p99_ms", &s.objective.ttft_p99_ms);
  b.Number("tpot_p99_ms", &s.objective.tpot_p99_ms);
  b.Number("e2e_p99_ms", &s.objective.e2e_p99_ms);
  b.Done();
  o.Done();
  return s;
}

}  // namespace

std::string TuneReportJson(const TuneReport& r) {
  ordered_json outcomes = ordered_json::array();
  for (const auto& o : r.outcomes) outcomes.push_back(OutcomeJson(o));
  ordered_json j = {{"format", kFormat},
                    {"spec", SpecJson(r.spec)},
                    {"manifest_path", r.manifest_path},
                    {"declaring_file", r.declaring_file},
                    {"model", r.model},
                    {"commit", r.commit},
                    {"started", r.started},
                    {"outcomes", outcomes},
                    {"winner", r.winner ? ordered_json(*r.winner) : ordered_json(nullptr)},
                    {"patch", r.patch},
                    {"ended_on", r.ended_on}};
  return DumpJson(j, 2) + "\n";
}

Result<TuneReport> TuneReportFromJson(std::string_view text) {
  auto refuse = [](const std::string& why) {
    return Status::InvalidArgument("tune report: " + why);
  };
  if (text.size() > kMaxTextBytes)
    return refuse("it is " + std::to_string(text.size()) + " bytes, more than the " +
                  std::to_string(kMaxTextBytes) + " berth reads");
  // nlohmann's parser recurses per level: a hostile "[[[[..." would overflow the stack.
  if (JsonNestedDeeperThan(text, kMaxDepth))
    return refuse("it nests deeper than " + std::to_string(kMaxDepth) + " levels");
  const json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return refuse("it is not JSON");
  std::string problem;
  Obj top(&j, "", &problem);
  if (!problem.empty()) return refuse(problem);
  // The format first: a later berth's report is refused as such, not by its first new key.
  int format = 0;
  top.Int("format", &format, 0);
  if (problem.empty() && format != kFormat)
    return refuse("format " + std::to_string(format) + " is not one this berth reads (it reads " +
                  std::to_string(kFormat) + ")");
  TuneReport r;
  r.spec = SpecFrom(top.Any("spec"), &problem);
  top.Str("manifest_path", &r.manifest_path);
  top.Str("declaring_file", &r.declaring_file);
  top.Str("model", &r.model);
  top.Str("commit", &r.commit);
  top.Str("started", &r.started);
  if (const json* outcomes = top.Array("outcomes", kMaxCandidates + 1))
    for (size_t i = 0; i < outcomes->size() && problem.empty(); ++i)
      r.outcomes.push_back(
          OutcomeFrom((*outcomes)[i], "outcomes[" + std::to_string(i) + "]", &problem));
  if (const json* winner = top.Any("winner"); winner && !winner->is_null()) {
    if (!winner->is_number_unsigned() || winner->get<uint64_t>() >= r.outcomes.size())
      top.Fail("winner must be null or the index of one of the " +
               std::to_string(r.outcomes.size()) + " outcomes");
    else if (!r.outcomes[winner->get<uint64_t>()].figures)
      top.Fail("winner names outcomes[" + std::to_string(winner->get<uint64_t>()) +
               "], which has no figures");
    else
      r.winner = winner->get<uint64_t>();
  }
  top.Str("patch", &r.patch);
  top.Str("ended_on", &r.ended_on);
  top.Done();
  if (!problem.empty()) return refuse(problem);
  return r;
}

}  // namespace berth
