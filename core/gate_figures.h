// What a floor gate or a floor's reference step measured on one service, with what it served
// then: the figures a relative floor compares with. berth keeps the newest of each unit in its
// state (BerthState::gate_figures), so a later switch away from that service compares with them
// when the service no longer serves and cannot be measured again.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace berth {

struct GateFigures {
  std::string time;      // RFC 3339 UTC, when measured; "" : no figures
  std::string unit;      // "vllm-kimi-k25.service"
  std::string source;    // "reference" (before a switch away from it) or "floor" (its own gate)
  std::string commit;    // the model commit it served; "" when berth could not tell
  std::string settings;  // RestartDigest of the unit it ran with; "" when berth could not tell
  // The load: figures are comparable only under the same one.
  int concurrency = 0;
  int max_tokens = 0;
  int prompt_tokens = 0;
  uint64_t goodput_ttft_ms = 0, goodput_tpot_ms = 0, goodput_e2el_ms = 0;  // 0: not a limit
  // What it measured (vllm bench serve's definitions, providers/bench/figures.h).
  double seconds = 0;
  uint64_t requests = 0;
  uint64_t errors = 0;
  double output_tps = 0;
  double ttft_p50_ms = 0, ttft_p99_ms = 0;
  double tpot_p50_ms = 0;
  bool has_goodput = false;  // goodput limits were given
  double goodput_rps = 0;    // finished requests meeting every limit, per second

  bool empty() const { return time.empty(); }
  friend bool operator==(const GateFigures&, const GateFigures&) = default;
};

/// How many figures berth keeps per unit (the oldest go first).
inline constexpr size_t kGateFiguresKept = 10;

/// "1240 output tok/s at concurrency 32 over 20 s, TTFT p50 180 ms, p99 420 ms, TPOT p50 25 ms,
/// 310 requests, 0 errors" (and ", goodput 12.5 req/s" when it has one).
std::string GateFiguresText(const GateFigures& g);

/// "commit 0123abc, settings 9f8e7d6c, measured 2026-12-02T15:04:05Z (its floor gate)": where
/// recorded figures come from, for a plan line and a gate's message.
std::string GateFiguresOrigin(const GateFigures& g);

/// Whether `g` was measured with the load of `want` (concurrency, tokens and goodput limits).
bool SameLoad(const GateFigures& g, const GateFigures& want);

/// The newest of `figures` (oldest first) with `settings` and the load of `load`; null: none.
const GateFigures* NewestRecorded(const std::vector<GateFigures>& figures,
                                  const std::string& settings, const GateFigures& load);

/// Appends `g` to `figures`, keeping the newest kGateFiguresKept.
void RecordGateFigures(std::vector<GateFigures>* figures, const GateFigures& g);

// JSON (state.json and saved plans), field by field. The reader needs every field with its type
// and throws std::invalid_argument naming the first that is missing or wrong.
template <class F>
void GateFiguresFields(GateFigures& g, F&& f) {
  f("time", g.time);
  f("unit", g.unit);
  f("source", g.source);
  f("commit", g.commit);
  f("settings", g.settings);
  f("concurrency", g.concurrency);
  f("max_tokens", g.max_tokens);
  f("prompt_tokens", g.prompt_tokens);
  f("goodput_ttft_ms", g.goodput_ttft_ms);
  f("goodput_tpot_ms", g.goodput_tpot_ms);
  f("goodput_e2el_ms", g.goodput_e2el_ms);
  f("seconds", g.seconds);
  f("requests", g.requests);
  f("errors", g.errors);
  f("output_tps", g.output_tps);
  f("ttft_p50_ms", g.ttft_p50_ms);
  f("ttft_p99_ms", g.ttft_p99_ms);
  f("tpot_p50_ms", g.tpot_p50_ms);
  f("has_goodput", g.has_goodput);
  f("goodput_rps", g.goodput_rps);
}

template <class J>
void to_json(J& j, const GateFigures& g) {
  j = J::object();
  GateFigures copy = g;
  GateFiguresFields(copy, [&](const char* key, const auto& value) { j[key] = value; });
}

template <class J>
void from_json(const J& j, GateFigures& g) {
  if (!j.is_object()) throw std::invalid_argument("figures: expected an object");
  GateFiguresFields(g, [&](const char* key, auto& value) {
    auto it = j.find(key);
    if (it == j.end()) throw std::invalid_argument(std::string("figures: no '") + key + "'");
    try {
      it->get_to(value);
    } catch (const std::exception&) {
      throw std::invalid_argument(std::string("figures: '") + key + "' is of the wrong type");
    }
  });
}

}  // namespace berth
