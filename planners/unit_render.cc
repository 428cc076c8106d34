#include "planners/unit_render.h"

#include "planners/on_demand.h"

#include "planners/servers/vllm.h"

#include <sstream>

#include "core/hash.h"
#include "core/units.h"

namespace berth {
namespace {

std::string JoinInts(const std::vector<int>& v, const char* sep) {
  std::string out;
  // Appended, not (i ? sep : "") + std::to_string(...): g++ 12 -O3 warns falsely on the
  // temporary (-Wrestrict, GCC bug 105329).
  for (size_t i = 0; i < v.size(); ++i) out.append(i ? sep : "").append(std::to_string(v[i]));
  return out;
}

// Writes each value through UnitValue and remembers the first refusal.
class UnitWriter {
 public:
  // A value for "Key=" of `kind`; "" after a refusal.
  std::string Value(UnitValueKind kind, const std::string& field, const std::string& value) {
    Result<std::string> v = UnitValue(kind, field, value);
    if (v.ok()) return *v;
    if (status_.ok()) status_ = v.status();
    return "";
  }
  std::string Env(const std::string& key, const std::string& value) {
    return Value(UnitValueKind::kEnvAssignment, "env " + key, key + "=" + value);
  }
  const Status& status() const { return status_; }

 private:
  Status status_;
};

// The Environment= assignments of the unit, in order.
std::vector<std::pair<std::string, std::string>> Environment(const ServiceSpec& s,
                                                             const RenderContext& ctx) {
  std::vector<std::pair<std::string, std::string>> env;
  if (!s.gpus.empty()) env.emplace_back("CUDA_VISIBLE_DEVICES", JoinInts(s.gpus, ","));
  if (!ctx.store.empty()) {
    env.emplace_back("HF_HUB_OFFLINE", "1");
    env.emplace_back("HF_HUB_CACHE", ctx.store);
  }
  // vLLM's compile cache kept across restarts, one per service (planners/servers/vllm.h), unless
  // the manifest's env places it.
  if (s.has_engine && s.engine == EngineKind::kVllm && !s.env.count("VLLM_CACHE_ROOT"))
    env.emplace_back("VLLM_CACHE_ROOT", std::string(kVllmCacheParent) + "/" + s.name);
  // standby: sleep: vLLM attaches its sleep routes only in dev mode (planners/servers/vllm.cc).
  if (s.has_engine && s.engine == EngineKind::kVllm && s.standby == Standby::kSleep &&
      !s.env.count("VLLM_SERVER_DEV_MODE"))
    env.emplace_back("VLLM_SERVER_DEV_MODE", "1");
  for (const auto& [k, v] : s.env) env.emplace_back(k, v);
  return env;
}

// The name of the manifest field an ExecStart word came from, for a refusal.
std::string ArgField(const ServiceSpec& s, const std::vector<std::string>& argv, size_t i) {
  if (i == 0) return s.engine == EngineKind::kCommand ? "command" : "executable";
  const std::string& v = argv[i];
  if (v == s.ServedName()) return "served model name";
  return "ExecStart argument " + std::to_string(i);
}

std::string Body(const ServiceSpec& s, const RenderContext& ctx, const RenderedUnit& r,
                 UnitWriter* w) {
  std::string description = EngineName(s.engine) + std::string(" serving ") + s.ServedName();
  if (!ctx.model_repo.empty()) description += " (" + ctx.model_repo + ")";
  if (s.port) description += " on port " + std::to_string(*s.port);
  std::ostringstream b;
  b << "[Unit]\n";
  b << "Description=" << w->Value(UnitValueKind::kPlain, "description", description) << "\n";
  b << "After=network-online.target\nWants=network-online.target\n";
  if (s.on_demand) {
    // Started by its proxy's Wants= on the first request; stopped once the proxy exits idle.
    b << "StopWhenUnneeded=yes\n";
    for (const std::string& other : ctx.conflicts)
      b << "Conflicts=" << w->Value(UnitValueKind::kPlain, "swap_group", other) << "\n";
    // Conflicts= alone runs the member's stop and the other's start at once, both on the GPU
    // for a moment. With an ordering edge, systemd runs the stop job first whichever way the
    // edge points (systemd.unit(5), Before=): one edge per pair, from the later name.
    for (const std::string& other : ctx.conflicts)
      if (other < s.UnitName())
        b << "After=" << w->Value(UnitValueKind::kPlain, "swap_group", other) << "\n";
  }
  // An on-demand server's every start is a request's, as its proxy's: with a start limit, the
  // sixth request in ten minutes to a model that fails to start would find it refused
  // (start-limit-hit) and not tried again, against its 503's "the next request starts it again".
  b << (s.on_demand ? "StartLimitIntervalSec=0\n\n"
                    : "StartLimitIntervalSec=600\nStartLimitBurst=5\n\n");
  b << "[Service]\nType=exec\n";
  b << "ExecStart=";
  for (size_t i = 0; i < r.argv.size(); ++i)
    b << (i ? " " : "") << w->Value(UnitValueKind::kExecArg, ArgField(s, r.argv, i), r.argv[i]);
  b << "\n";
  for (const auto& [k, v] : Environment(s, ctx)) b << "Environment=" << w->Env(k, v) << "\n";
  if (!s.env_file.empty())
    b << "EnvironmentFile=" << w->Value(UnitValueKind::kPlain, "env_file", s.env_file) << "\n";
  if (s.on_demand) {
    // Active only once healthy: the proxy, ordered after this unit, connects then.
    b << "ExecStartPost=" << w->Value(UnitValueKind::kExecArg, "berth", ctx.berth_executable)
      << " __wait-healthy " << w->Value(UnitValueKind::kExecArg, "health", OnDemandHealthUrl(s))
      << " --timeout-ms " << s.health.timeout_ms << "\n";
    // A failure is the waiting request's (its proxy answers 503), and the next request starts
    // it again: systemd does not restart it on its own.
    b << "Restart=no\n";
  } else {
    b << "Restart=on-failure\nRestartSec=10\n";
  }
  // The health gate bounds a start; systemd's own timeout sits just above it.
  b << "TimeoutStartSec=" << FormatDurationMs(s.health.timeout_ms + 60000) << "\n";
  // The default as berth always wrote it ("2min"), so that no unit berth wrote before changes.
  b << "TimeoutStopSec="
    << (s.stop_timeout_ms == ServiceSpec::kDefaultStopTimeoutMs
            ? std::string("2min")
            : FormatDurationMs(s.stop_timeout_ms))
    << "\nKillMode=mixed\n\n";
  // An on-demand server is started by its socket's proxy, never at boot: no [Install].
  if (!s.on_demand) b << "[Install]\nWantedBy=multi-user.target\n";
  return b.str();
}

void Finish(const std::string& body, const RenderContext& ctx, RenderedUnit* r) {
  r->spec_hash = Sha256Hex(body);
  r->content = std::string(kUnitMarker) + " " + ctx.berth_version +
               ". Edits are drift: berth rewrites this file.\n" + kSpecHashKey + r->spec_hash +
               "\n" + body;
}

}  // namespace

Result<RenderedUnit> TryRenderUnit(const ServiceSpec& s, const RenderContext& ctx) {
  RenderedUnit r;
  r.name = s.UnitName();
  r.argv = ServiceArgv(s, ctx);
  for (const auto& [k, v] : Environment(s, ctx))
    r.env.push_back(std::string(k).append("=").append(v));
  r.env_file = s.env_file;
  UnitWriter w;
  std::string body = Body(s, ctx, r, &w);
  if (!w.status().ok()) return w.status().WithContext("unit " + r.name);
  // Nothing berth writes may end a line early: a last guard against a writer that forgot one.
  if (body.find('\r') != std::string::npos || body.find('\0') != std::string::npos)
    return Status::Internal("unit " + r.name + ": a carriage return or NUL in the rendered unit");
  Finish(body, ctx, &r);
  return r;
}

namespace {

// The header, a body from `write`, and the checks TryRenderUnit makes, for a unit `name`.
template <typename F>
Result<RenderedUnit> RenderCompanion(const std::string& name, const RenderContext& ctx, F write) {
  RenderedUnit r;
  r.name = name;
  UnitWriter w;
  std::string body = write(&w);
  if (!w.status().ok()) return w.status().WithContext("unit " + r.name);
  if (body.find('\r') != std::string::npos || body.find('\0') != std::string::npos)
    return Status::Internal("unit " + r.name + ": a carriage return or NUL in the rendered unit");
  Finish(body, ctx, &r);
  return r;
}

}  // namespace

Result<RenderedUnit> RenderOnDemandSocket(const ServiceSpec& s, const RenderContext& ctx) {
  return RenderCompanion(OnDemandSocketName(s.name), ctx, [&](UnitWriter* w) {
    const OnDemandSpec& od = *s.on_demand;
    std::ostringstream b;
    b << "[Unit]\nDescription="
      << w->Value(UnitValueKind::kPlain, "description",
                  "port " + std::to_string(od.public_port) + " of on-demand service " + s.name)
      << "\n\n[Socket]\n";
    b << "ListenStream="
      << w->Value(UnitValueKind::kPlain, "bind", ListenAddress(od.bind, od.public_port)) << "\n";
    b << "Service=" << OnDemandProxyName(s.name) << "\n\n";
    b << "[Install]\nWantedBy=sockets.target\n";
    return b.str();
  });
}

Result<RenderedUnit> RenderOnDemandProxy(const ServiceSpec& s, const RenderContext& ctx) {
  return RenderCompanion(OnDemandProxyName(s.name), ctx, [&](UnitWriter* w) {
    const OnDemandSpec& od = *s.on_demand;
    std::ostringstream b;
    b << "[Unit]\nDescription="
      << w->Value(UnitValueKind::kPlain, "description",
                  "proxy of on-demand service " + s.name + " (starts it, stops when idle)")
      << "\n";
    b << "Wants=" << s.UnitName() << "\nAfter=" << s.UnitName() << "\nPartOf=" << s.UnitName()
      << "\n";
    // Every start is a connection's: systemd's start rate limit would fail the socket.
    b << "StartLimitIntervalSec=0\n\n";
    b << "[Service]\nType=exec\n";
    b << "ExecStart=" << w->Value(UnitValueKind::kExecArg, "berth", ctx.berth_executable)
      << " __wake-proxy " << s.UnitName() << " "
      << w->Value(UnitValueKind::kExecArg, "health", OnDemandHealthUrl(s)) << " -- "
      << kSocketProxyd << " --exit-idle-time=" << (od.idle_stop_ms + 999) / 1000 << "s "
      << "127.0.0.1:" << s.port.value_or(0) << "\n";
    return b.str();
  });
}

RenderedUnit RenderUnit(const ServiceSpec& s, const RenderContext& ctx) {
  Result<RenderedUnit> r = TryRenderUnit(s, ctx);
  if (r.ok()) return std::move(r).value();
  RenderedUnit refused;
  refused.name = s.UnitName();
  refused.refused = r.status().message();
  for (char& c : refused.refused)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  Finish("# berth refused to write this unit: " + refused.refused + "\n", ctx, &refused);
  return refused;
}

}  // namespace berth
