#include "planners/unit_render.h"

#include <sstream>

#include "engine/core/hash.h"
#include "engine/core/units.h"

namespace berth {
namespace {

std::string JoinInts(const std::vector<int>& v, const char* sep) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + std::to_string(v[i]);
  return out;
}

}  // namespace

RenderedUnit RenderUnit(const ServiceSpec& s, const RenderContext& ctx) {
  RenderedUnit r;
  r.name = s.UnitName();
  r.argv = ServiceArgv(s, ctx);
  std::ostringstream b;
  b << "[Unit]\n";
  b << "Description=" << EngineName(s.engine) << " serving " << s.ServedName();
  if (!ctx.model_repo.empty()) b << " (" << ctx.model_repo << ")";
  if (s.port) b << " on port " << *s.port;
  b << "\n";
  b << "After=network-online.target\nWants=network-online.target\n";
  b << "StartLimitIntervalSec=600\nStartLimitBurst=5\n\n";
  b << "[Service]\nType=exec\n";
  b << "ExecStart=";
  for (size_t i = 0; i < r.argv.size(); ++i) b << (i ? " " : "") << QuoteExecArg(r.argv[i]);
  b << "\n";
  if (!s.gpus.empty())
    b << "Environment=" << QuoteEnvAssignment("CUDA_VISIBLE_DEVICES=" + JoinInts(s.gpus, ","))
      << "\n";
  if (!ctx.store.empty()) {
    b << "Environment=" << QuoteEnvAssignment("HF_HUB_OFFLINE=1") << "\n";
    b << "Environment=" << QuoteEnvAssignment("HF_HUB_CACHE=" + ctx.store) << "\n";
  }
  for (const auto& [k, v] : s.env) b << "Environment=" << QuoteEnvAssignment(k + "=" + v) << "\n";
  if (!s.env_file.empty()) b << "EnvironmentFile=" << s.env_file << "\n";
  b << "Restart=on-failure\nRestartSec=10\n";
  // The health gate bounds a start; systemd's own timeout sits just above it.
  b << "TimeoutStartSec=" << FormatDurationMs(s.health.timeout_ms + 60000) << "\n";
  b << "TimeoutStopSec=2min\nKillMode=mixed\n\n";
  b << "[Install]\nWantedBy=multi-user.target\n";
  std::string body = b.str();
  r.spec_hash = Sha256Hex(body);
  r.content = std::string(kUnitMarker) + " " + ctx.berth_version +
              ". Edits are drift: berth rewrites this file.\n" + kSpecHashKey + r.spec_hash + "\n" +
              body;
  return r;
}

}  // namespace berth
