#include "engine/output/bench_text.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <vector>

#include "core/json_text.h"
#include "core/untrusted_text.h"

namespace berth {
namespace {

std::string Printf(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

std::string Pad(const std::string& s, size_t width, bool right) {
  if (s.size() >= width) return s;
  return right ? std::string(width - s.size(), ' ') + s : s + std::string(width - s.size(), ' ');
}

// bench.json's text (names, the store's commit, a server's error) is shown escaped, one line each.
std::string ShortCommit(const std::string& commit) {
  return commit.empty() ? "(commit unknown)" : EscapeLine(Utf8Prefix(commit, 12));
}

const BenchLevel* FindLevel(const BenchRecord& r, int concurrency) {
  for (const auto& l : r.levels)
    if (l.concurrency == concurrency) return &l;
  return nullptr;
}

}  // namespace

std::string FormatLatencyMs(double ms) {
  if (ms >= 1000) return Printf("%.2f s", ms / 1000);
  if (ms >= 100) return Printf("%.0f ms", ms);
  if (ms >= 10) return Printf("%.1f ms", ms);
  return Printf("%.2f ms", ms);
}

std::string FormatTps(double tps) { return Printf(tps >= 1000 ? "%.0f" : "%.1f", tps); }

std::string FormatGrouped(double v) {
  std::string digits = Printf("%.0f", v), out;
  const size_t first = digits.find_first_of("0123456789");
  if (first == std::string::npos) return digits;  // nan, inf
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > first && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string BenchHeaderText(const BenchRecord& r, const std::string& endpoint) {
  std::ostringstream out;
  out << "berth bench " << EscapeLine(r.service) << ": "
      << (r.repo_id.empty() ? std::string("(no model repo)") : EscapeLine(r.repo_id)) << "@"
      << ShortCommit(r.commit) << " served as '" << EscapeLine(r.served_name) << "' on "
      << EscapeLine(endpoint) << "\n";
  out << (r.chat ? "chat completions" : "completions") << ", streamed; prompt " << r.prompt_tokens
      << " words, max " << r.max_tokens << " tokens; ";
  if (r.num_prompts > 0)
    out << r.num_prompts << " requests per concurrency";
  else
    out << Printf("%g", r.duration_s) << " s per concurrency";
  if (r.request_rate > 0) out << ", " << Printf("%g", r.request_rate) << " requests/s (Poisson)";
  if (!r.warmup.empty()) out << ", warm-up " << EscapeLine(r.warmup);
  out << "\n";
  return out.str();
}

std::string BenchLevelsText(const BenchRecord& r) {
  std::ostringstream out;
  const char* cols[] = {"concurrency", "requests", "errors",  "output tok/s",
                        "TTFT p50",    "TTFT p99", "ITL p50", "ITL p99"};
  const size_t widths[] = {11, 9, 7, 13, 10, 10, 9, 9};
  for (size_t i = 0; i < 8; ++i) out << (i ? "  " : "") << Pad(cols[i], widths[i], i > 0);
  out << "\n";
  for (const auto& l : r.levels) {
    std::string cells[] = {std::to_string(l.concurrency),  std::to_string(l.requests),
                           std::to_string(l.errors),       FormatTps(l.output_tps),
                           FormatLatencyMs(l.ttft_p50_ms), FormatLatencyMs(l.ttft_p99_ms),
                           FormatLatencyMs(l.itl_p50_ms),  FormatLatencyMs(l.itl_p99_ms)};
    for (size_t i = 0; i < 8; ++i) out << (i ? "  " : "") << Pad(cells[i], widths[i], true);
    out << "\n";
  }
  // The figures per request of vllm bench serve, for runs that measured them.
  bool per_request = false, goodput = false;
  for (const auto& l : r.levels) {
    per_request = per_request || l.has_request_figures;
    goodput = goodput || l.has_goodput;
  }
  if (per_request) {
    std::vector<std::string> head = {"concurrency", "req/s",   "TPOT p50", "TPOT p90",  "TPOT p99",
                                     "E2E p50",     "E2E p90", "E2E p99",  "tok/s/user"};
    if (goodput) head.push_back("goodput req/s");
    out << "\n";
    for (size_t i = 0; i < head.size(); ++i)
      out << (i ? "  " : "") << Pad(head[i], i ? std::max<size_t>(head[i].size(), 9) : 11, i > 0);
    out << "\n";
    for (const auto& l : r.levels) {
      std::vector<std::string> cells = {std::to_string(l.concurrency)};
      if (l.has_request_figures) {
        // No request finished (all cut at the end of the duration): no TPOT or E2E to show.
        auto ms = [&](double v) { return l.requests ? FormatLatencyMs(v) : std::string("-"); };
        cells.insert(cells.end(),
                     {Printf("%.2f", l.request_tps), ms(l.tpot_p50_ms), ms(l.tpot_p90_ms),
                      ms(l.tpot_p99_ms), ms(l.e2e_p50_ms), ms(l.e2e_p90_ms), ms(l.e2e_p99_ms),
                      l.requests ? FormatTps(l.user_tps_p50) : "-"});
        if (goodput) cells.push_back(l.has_goodput ? Printf("%.2f", l.goodput_rps) : "-");
      }
      cells.resize(head.size(), "-");
      for (size_t i = 0; i < cells.size(); ++i)
        out << (i ? "  " : "") << Pad(cells[i], i ? std::max<size_t>(head[i].size(), 9) : 11, true);
      out << "\n";
    }
  }
  // The server's own account beside berth's (llama.cpp's timings): they should agree.
  for (const auto& l : r.levels)
    if (l.server_requests)
      out << "concurrency " << l.concurrency << ": the server's own account of "
          << l.server_requests << " of " << l.requests << " requests: " << l.server_output_tokens
          << " output tokens (berth counted " << l.output_tokens << "), "
          << Printf("%.0f", l.server_decode_ms) << " ms of decode, TPOT mean "
          << FormatLatencyMs(l.server_tpot_mean_ms) << " (berth " << FormatLatencyMs(l.tpot_mean_ms)
          << ")\n";
  for (const auto& l : r.levels)
    if (!l.first_error.empty())
      out << "concurrency " << l.concurrency << ": " << l.errors << " failed request"
          << (l.errors == 1 ? "" : "s") << "; the first: " << EscapeLine(l.first_error) << "\n";
  return out.str();
}

std::string BenchCompareText(const std::vector<BenchRecord>& columns) {
  if (columns.empty())
    return "no benchmark recorded yet: run berth bench SERVICE -f MANIFEST first\n";
  std::set<int> levels;
  for (const auto& r : columns)
    for (const auto& l : r.levels) levels.insert(l.concurrency);
  std::vector<std::vector<std::string>> rows;
  auto row = [&](const std::string& label, auto cell) {
    std::vector<std::string> cells{label};
    for (const auto& r : columns) cells.push_back(cell(r));
    rows.push_back(std::move(cells));
  };
  row("service", [](const BenchRecord& r) { return EscapeLine(r.service); });
  row("model", [](const BenchRecord& r) {
    return EscapeLine(r.repo_id.empty() ? r.served_name : r.repo_id);
  });
  row("commit", [](const BenchRecord& r) { return ShortCommit(r.commit); });
  row("measured", [](const BenchRecord& r) { return EscapeLine(r.time); });
  auto figure = [&](const std::string& label, int c, double BenchLevel::*field, bool tps) {
    row(label + " @" + std::to_string(c), [&](const BenchRecord& r) -> std::string {
      const BenchLevel* l = FindLevel(r, c);
      if (!l) return "-";
      return tps ? FormatTps(l->*field) : FormatLatencyMs(l->*field);
    });
  };
  for (int c : levels) figure("output tok/s", c, &BenchLevel::output_tps, true);
  for (int c : levels) {
    figure("TTFT p50", c, &BenchLevel::ttft_p50_ms, false);
    figure("TTFT p99", c, &BenchLevel::ttft_p99_ms, false);
  }
  for (int c : levels) {
    figure("ITL p50", c, &BenchLevel::itl_p50_ms, false);
    figure("ITL p99", c, &BenchLevel::itl_p99_ms, false);
  }
  // Per-request figures, when a record has them: "-" for one written before berth measured
  // them.
  bool any_request_figures = false;
  for (const auto& r : columns)
    for (const auto& l : r.levels)
      any_request_figures = any_request_figures || l.has_request_figures;
  auto request_figure = [&](const std::string& label, int c, double BenchLevel::*field,
                            bool latency) {
    row(label + " @" + std::to_string(c), [&](const BenchRecord& r) -> std::string {
      const BenchLevel* l = FindLevel(r, c);
      if (!l || !l->has_request_figures || (latency && l->requests == 0)) return "-";
      return latency ? FormatLatencyMs(l->*field) : Printf("%.2f", l->*field);
    });
  };
  if (any_request_figures) {
    for (int c : levels) request_figure("req/s", c, &BenchLevel::request_tps, false);
    for (int c : levels) {
      request_figure("TPOT p50", c, &BenchLevel::tpot_p50_ms, true);
      request_figure("TPOT p99", c, &BenchLevel::tpot_p99_ms, true);
    }
    for (int c : levels) {
      request_figure("E2E p50", c, &BenchLevel::e2e_p50_ms, true);
      request_figure("E2E p99", c, &BenchLevel::e2e_p99_ms, true);
    }
  }
  for (int c : levels)
    row("errors @" + std::to_string(c), [&](const BenchRecord& r) -> std::string {
      const BenchLevel* l = FindLevel(r, c);
      return l ? std::to_string(l->errors) : "-";
    });
  std::vector<size_t> width(columns.size() + 1, 0);
  for (const auto& cells : rows)
    for (size_t i = 0; i < cells.size(); ++i) width[i] = std::max(width[i], cells[i].size());
  std::ostringstream out;
  for (const auto& cells : rows) {
    std::string line;
    for (size_t i = 0; i < cells.size(); ++i)
      line += (i ? "   " : "") +
              Pad(cells[i], width[i], /*right=*/i > 0 && rows.size() > 4 && &cells - &rows[0] >= 4);
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out << line << "\n";
  }
  return out.str();
}

std::string BenchCompareJson(const std::vector<BenchRecord>& columns) {
  nlohmann::json cols = nlohmann::json::array();
  for (const auto& r : columns)
    cols.push_back(nlohmann::json::parse(BenchRecordToJson(r), nullptr, false));
  return DumpJson(nlohmann::json{{"columns", cols}}, 2) + "\n";
}

}  // namespace berth
