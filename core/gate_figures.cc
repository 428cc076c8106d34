#include "core/gate_figures.h"

#include <string_view>

#include "core/units.h"

namespace berth {

std::string GateFiguresText(const GateFigures& g) {
  std::string s = FormatDouble(g.output_tps) + " output tok/s at concurrency " +
                  std::to_string(g.concurrency) + " over " + FormatDouble(g.seconds) +
                  " s, TTFT p50 " + FormatDouble(g.ttft_p50_ms) + " ms, p99 " +
                  FormatDouble(g.ttft_p99_ms) + " ms, TPOT p50 " + FormatDouble(g.tpot_p50_ms) +
                  " ms";
  if (g.has_goodput) {
    s += ", goodput ";
    s += FormatDouble(g.goodput_rps);
    s += " req/s";
  }
  s += ", ";
  s += std::to_string(g.requests);
  s += " requests, ";
  s += std::to_string(g.errors);
  s += " errors";
  return s;
}

std::string GateFiguresOrigin(const GateFigures& g) {
  std::string s;
  if (!g.commit.empty()) s += "commit " + g.commit.substr(0, 7) + ", ";
  if (!g.settings.empty()) {
    // "restart-keys:<sha256>": the hash is what tells settings apart.
    std::string_view hash = g.settings;
    if (size_t colon = hash.rfind(':'); colon != std::string_view::npos)
      hash = hash.substr(colon + 1);
    s += "settings ";
    s += hash.substr(0, 8);
    s += ", ";
  }
  s += "measured " + g.time;
  s += g.source == "reference" ? " (before a switch away from it)" : " (its floor gate)";
  return s;
}

bool SameLoad(const GateFigures& g, const GateFigures& want) {
  return g.concurrency == want.concurrency && g.max_tokens == want.max_tokens &&
         g.prompt_tokens == want.prompt_tokens && g.goodput_ttft_ms == want.goodput_ttft_ms &&
         g.goodput_tpot_ms == want.goodput_tpot_ms && g.goodput_e2el_ms == want.goodput_e2el_ms;
}

const GateFigures* NewestRecorded(const std::vector<GateFigures>& figures,
                                  const std::string& settings, const GateFigures& load) {
  if (settings.empty()) return nullptr;
  for (auto it = figures.rbegin(); it != figures.rend(); ++it)
    if (it->settings == settings && SameLoad(*it, load) && it->requests > 0) return &*it;
  return nullptr;
}

void RecordGateFigures(std::vector<GateFigures>* figures, const GateFigures& g) {
  figures->push_back(g);
  if (figures->size() > kGateFiguresKept)
    figures->erase(figures->begin(), figures->end() - static_cast<long>(kGateFiguresKept));
}

}  // namespace berth
