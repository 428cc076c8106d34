#include "tests/support/fake_world.h"

namespace berth::testing {

Result<std::vector<UnitProperties>> FakeSystemd::GetUnits(const std::vector<std::string>& names) {
  std::vector<UnitProperties> out;
  for (const std::string& n : names) {
    UnitProperties p;
    p.name = n;
    if (const ObservedUnit* u = w_->host.observed().FindUnit(n)) {
      p.load_state = u->load_state;
      p.active_state = u->active_state;
      p.sub_state = u->sub_state;
      p.fragment_path = u->fragment_path;
      p.need_daemon_reload = u->need_daemon_reload;
      p.main_pid = static_cast<uint32_t>(u->main_pid);
      p.n_restarts = static_cast<uint32_t>(u->n_restarts);
      p.result = u->result;
      p.invocation_id = u->invocation_id;
      p.unit_file_state = u->unit_file_state;
    }
    out.push_back(p);
  }
  return out;
}

Status FakeSystemd::Reload() {
  w_->calls.push_back("daemon-reload");
  if (w_->on_job) w_->on_job("daemon-reload", "");
  w_->host.Reload();
  return Status::Ok();
}

Status FakeSystemd::Start(const std::string& unit, std::chrono::milliseconds) {
  w_->calls.push_back("start " + unit);
  if (w_->on_job) w_->on_job("start", unit);
  ObservedUnit& u = w_->host.Unit(unit);
  if (u.load_state == "not-found") return Status::NotFound("Unit " + unit + " not found.");
  if (w_->fail_start.count(unit)) {
    u.active_state = "failed";
    u.sub_state = "failed";
    u.result = "exit-code";
    return Status::FailedPrecondition("start of " + unit + " failed (Result=exit-code)");
  }
  w_->host.Start(unit, w_->desired);
  // As systemd: a start asked for (not an automatic restart) resets the restart counter.
  w_->host.Unit(unit).n_restarts = 0;
  w_->host.Unit(unit).result = "success";
  w_->probes[unit] = 0;
  if (w_->crash_loop.count(unit)) {
    ObservedUnit& c = w_->host.Unit(unit);
    c.sub_state = "auto-restart";
    c.active_state = "activating";
    c.n_restarts = 1;
    c.result = "exit-code";
  }
  return Status::Ok();
}

Status FakeSystemd::Stop(const std::string& unit, std::chrono::milliseconds) {
  w_->calls.push_back("stop " + unit);
  if (w_->on_job) w_->on_job("stop", unit);
  w_->host.Stop(unit);
  ObservedUnit& u = w_->host.Unit(unit);
  u.n_restarts = 0;
  u.result = "success";
  w_->host.CollectGarbage();
  return Status::Ok();
}

Status FakeSystemd::Restart(const std::string& unit, std::chrono::milliseconds timeout) {
  w_->calls.push_back("restart " + unit);
  w_->host.Stop(unit);
  return Start(unit, timeout);
}

Status FakeSystemd::Enable(const std::string& unit) {
  w_->calls.push_back("enable " + unit);
  if (w_->on_job) w_->on_job("enable", unit);
  const ObservedUnit* u = w_->host.observed().FindUnit(unit);
  if (!u || !u->HasFile()) return Status::NotFound("Unit file " + unit + " does not exist.");
  if (u->unit_file_state.rfind("masked", 0) == 0)
    return Status::FailedPrecondition("Unit file " + unit + " is masked.");
  if (u->unit_file_state == "static")
    return Status::FailedPrecondition(unit + " has no [Install] section");
  w_->host.SetUnitFileState(unit, "enabled");
  return Status::Ok();
}

Status FakeSystemd::Disable(const std::string& unit) {
  w_->calls.push_back("disable " + unit);
  if (w_->on_job) w_->on_job("disable", unit);
  const ObservedUnit* u = w_->host.observed().FindUnit(unit);
  if (u && u->unit_file_state == "enabled") w_->host.SetUnitFileState(unit, "disabled");
  return Status::Ok();
}

Result<bool> FakeUnitFiles::Write(const std::string& unit, const std::string& content) {
  w_->calls.push_back("write " + unit);
  w_->host.WriteUnit(unit, content);
  return true;
}

Result<bool> FakeUnitFiles::Remove(const std::string& unit) {
  w_->calls.push_back("remove " + unit);
  w_->host.RemoveUnit(unit);
  return true;
}

Result<std::optional<std::string>> FakeUnitFiles::Read(const std::string& unit) const {
  const ObservedUnit* u = w_->host.observed().FindUnit(unit);
  if (!u || !u->HasFile()) return std::optional<std::string>();
  return std::optional<std::string>(u->content);
}

Result<std::vector<std::string>> FakeUnitFiles::ListBerthUnits() const {
  std::vector<std::string> out;
  for (const auto& u : w_->host.observed().units)
    if (u.managed) out.push_back(u.name);
  return out;
}

Result<Fetched> FakeModelStore::Download(const DownloadStep& a, const std::atomic<bool>*,
                                         const std::function<void(const PullProgress&)>&) {
  std::lock_guard<std::mutex> lock(w_->download_mu);
  w_->calls.push_back("download " + a.repo_id);
  if (w_->fail_download.count(a.repo_id))
    return Status::Unavailable("the Hub answered 503 for " + a.repo_id);
  w_->host.Download(a, w_->desired);
  Fetched f;
  f.commit = a.commit.empty() ? Commit("f") : a.commit;
  f.bytes_total = f.bytes_fetched = w_->host.DownloadSize(a, w_->desired);
  f.files = 1;
  return f;
}

Result<uint64_t> FakeModelStore::Remove(const std::string& repo_id, const std::string& commit) {
  w_->calls.push_back("remove-model " + repo_id);
  w_->host.RemoveModel(repo_id, commit);
  return uint64_t{0};
}

namespace {

// The unit whose socket a request to host:port reaches, as the kernel routes it: one bound to
// that address, or to every address (0.0.0.0, ::); "" when none listens there.
std::string Listener(const Observed& o, const std::string& host, int port) {
  std::string unit;
  for (const auto& p : o.ports)
    if (p.port == port &&
        (p.address.empty() || p.address == "0.0.0.0" || p.address == "::" || p.address == host))
      unit = p.unit;
  return unit;
}

}  // namespace

HealthResult FakeHealth::Probe(const std::string& host, int port, const std::string& path,
                               const std::string& served_name) {
  w_->calls.push_back("probe " + std::to_string(port));
  w_->dialed.push_back(host + ":" + std::to_string(port));
  HealthResult r;
  std::string unit = Listener(w_->host.observed(), host, port);
  const ObservedUnit* u = unit.empty() ? nullptr : w_->host.observed().FindUnit(unit);
  if (!u || !u->IsActive()) {
    r.detail = "GET http://" + host + ":" + std::to_string(port) + path + ": connection refused";
    return r;
  }
  int n = ++w_->probes[unit];
  auto after = w_->healthy_after.find(unit);
  if (w_->never_healthy.count(unit) || (after != w_->healthy_after.end() && n < after->second)) {
    r.health_status = 503;
    r.detail = "GET http://" + host + ":" + std::to_string(port) + path + ": 503";
    return r;
  }
  r.healthy = true;
  r.health_status = 200;
  r.model_listed = !served_name.empty();
  return r;
}

SmokeResult FakeSmoke::Send(const std::string& host, int port, const SmokeRequest& request) {
  w_->calls.push_back("smoke " + std::to_string(port));
  if (w_->smoke_hook) w_->smoke_hook();
  w_->dialed.push_back(host + ":" + std::to_string(port));
  SmokeResult r;
  r.elapsed_ms = 120;
  std::string unit = Listener(w_->host.observed(), host, port);
  const ObservedUnit* u = unit.empty() ? nullptr : w_->host.observed().FindUnit(unit);
  std::string where = "POST http://" + host + ":" + std::to_string(port) + "/v1/" +
                      (request.api == "chat" ? "chat/completions" : "completions");
  if (!u || !u->IsActive()) {
    r.detail = where + ": connection refused";
    return r;
  }
  r.http_status = 200;
  if (w_->smoke_empty.count(unit)) {
    r.detail = where + ": HTTP 200 with empty text";
    return r;
  }
  r.text = "hello";
  r.ok = true;
  return r;
}

CommandResult FakeCommands::Run(const std::vector<std::string>& argv, uint64_t,
                                const std::vector<std::string>* env) {
  std::string cmd;
  for (const auto& a : argv) cmd += (cmd.empty() ? "" : " ") + a;
  w_->calls.push_back("run " + cmd);
  w_->command_envs.push_back(env ? *env : std::vector<std::string>{});
  CommandResult r;
  r.started = true;
  r.elapsed_ms = 50;
  auto it = argv.empty() ? w_->fail_commands.end() : w_->fail_commands.find(argv[0]);
  r.exit_status = it == w_->fail_commands.end() ? 0 : it->second;
  if (r.exit_status != 0) {
    auto out = argv.empty() ? w_->fail_output.end() : w_->fail_output.find(argv[0]);
    r.output_tail =
        out != w_->fail_output.end() ? out->second : "ValueError: unsupported architecture\n";
  }
  return r;
}

Result<Observed> FakeObserver::Observe(const Desired&) {
  w_->calls.push_back("observe");
  // As the live observer: whether a unit crash-loops is decided when it is seen.
  Observed o = w_->host.observed();
  MarkCrashLoops(&o.units, static_cast<uint64_t>(w_->clock.UnixNow() * 1e6));
  return o;
}

ReconcilerDeps FakeWorld::Deps(Reporter* reporter) {
  ReconcilerDeps d;
  d.connect = [this](const Desired& wanted) -> Result<HostSeams> {
    desired = wanted;
    HostSeams s;
    s.observer = &observer;
    s.systemd = &systemd;
    s.unit_files = &unit_files;
    s.health = &health;
    s.models = &models;
    s.smoke = &smoke;
    s.commands = &commands;
    s.load = [this](const LoadSpec& spec, const std::atomic<bool>*) -> Result<LoadFigures> {
      calls.push_back("load " + std::to_string(spec.port));
      dialed.push_back(spec.host + ":" + std::to_string(spec.port));
      clock.Advance(spec.duration);
      auto queued = load_sequence.find(spec.port);
      if (queued != load_sequence.end() && !queued->second.empty()) {
        LoadFigures next = queued->second.front();
        queued->second.pop_front();
        return next;
      }
      auto it = load_figures.find(spec.port);
      if (it != load_figures.end()) return it->second;
      LoadFigures f;
      f.concurrency = spec.concurrency;
      f.seconds = std::chrono::duration<double>(spec.duration).count();
      f.output_tps = 1000;
      f.output_tokens = static_cast<uint64_t>(1000 * f.seconds);
      f.requests = 10;
      f.ttft_p50_ms = 50;
      f.ttft_p99_ms = 80;
      return f;
    };
    return s;
  };
  d.hostname = [this] { return host.observed().hostname; };
  d.clock = &clock;
  d.reporter = reporter;
  return d;
}

}  // namespace berth::testing
