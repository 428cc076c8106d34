// The Reconciler's collaborators on an in-memory FakeHost: a systemd that flips unit states in
// the observation (and can be told to fail a start or crash-loop a unit), unit files, a model
// store, a health probe, an observer and a clock that jumps instead of sleeping. Every call is
// remembered. For executor and reconciler tests that run in milliseconds; the sandbox tests
// prove the same against a real systemd.
#pragma once

#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "engine/apply/model_store.h"
#include "engine/apply/reconciler.h"
#include "providers/health/health_probe.h"
#include "providers/health/smoke_client.h"
#include "providers/host/command_runner.h"
#include "providers/systemd/systemd_manager.h"
#include "providers/systemd/unit_files.h"
#include "tests/support/fake_clock.h"
#include "tests/support/fake_host.h"

namespace berth::testing {

class FakeWorld;

class FakeSystemd : public SystemdManager {
 public:
  explicit FakeSystemd(FakeWorld* w) : w_(w) {}
  Result<std::vector<UnitProperties>> GetUnits(const std::vector<std::string>& names) override;
  Status Reload() override;
  Status Start(const std::string& unit, std::chrono::milliseconds timeout) override;
  Status Stop(const std::string& unit, std::chrono::milliseconds timeout) override;
  Status Restart(const std::string& unit, std::chrono::milliseconds timeout) override;
  /// Flip unit_file_state between "disabled" and "enabled" as systemd's symlinks would; a
  /// static (no [Install]) or masked unit is refused, as systemd refuses it.
  Status Enable(const std::string& unit) override;
  Status Disable(const std::string& unit) override;

 private:
  FakeWorld* w_;
};

class FakeUnitFiles : public UnitFiles {
 public:
  explicit FakeUnitFiles(FakeWorld* w) : w_(w) {}
  const std::string& dir() const override { return dir_; }
  Result<bool> Write(const std::string& unit, const std::string& content) override;
  Result<bool> Remove(const std::string& unit) override;
  Result<std::optional<std::string>> Read(const std::string& unit) const override;
  Result<std::vector<std::string>> ListBerthUnits() const override;

 private:
  FakeWorld* w_;
  std::string dir_ = "/etc/systemd/system";
};

class FakeModelStore : public ModelStore {
 public:
  explicit FakeModelStore(FakeWorld* w) : w_(w) {}
  Result<Fetched> Download(const DownloadStep& a, const std::atomic<bool>* cancel,
                           const std::function<void(const PullProgress&)>& on_progress) override;
  Result<uint64_t> Remove(const std::string& repo_id, const std::string& commit) override;

 private:
  FakeWorld* w_;
};

class FakeHealth : public HealthProbe {
 public:
  explicit FakeHealth(FakeWorld* w) : w_(w) {}
  HealthResult Probe(const std::string& host, int port, const std::string& path,
                     const std::string& served_name) override;

 private:
  FakeWorld* w_;
};

/// Answers a smoke request with text when the unit on its port runs, unless told otherwise.
class FakeSmoke : public SmokeClient {
 public:
  explicit FakeSmoke(FakeWorld* w) : w_(w) {}
  SmokeResult Send(const std::string& host, int port, const SmokeRequest& request) override;

 private:
  FakeWorld* w_;
};

/// Runs no process: a command exits 0 unless its argv[0] is in FakeWorld::fail_commands.
class FakeCommands : public CommandRunner {
 public:
  explicit FakeCommands(FakeWorld* w) : w_(w) {}
  using CommandRunner::Run;
  CommandResult Run(const std::vector<std::string>& argv, uint64_t timeout_ms,
                    const std::vector<std::string>* env) override;

 private:
  FakeWorld* w_;
};

class FakeObserver : public HostObserver {
 public:
  explicit FakeObserver(FakeWorld* w) : w_(w) {}
  Result<Observed> Observe(const Desired& desired) override;

 private:
  FakeWorld* w_;
};

/// A host in memory and the seams onto it.
class FakeWorld {
 public:
  explicit FakeWorld(Observed observed) : host(std::move(observed)) {}

  /// The Reconciler's deps on this world, reporting to `reporter`.
  ReconcilerDeps Deps(Reporter* reporter);

  FakeHost host;
  Desired desired;  // the manifest of the pass in progress (set by connect)
  FakeClock clock;
  std::vector<std::string> calls;  // "start x.service", "probe 8000", "download org/name"...
  /// "HOST:PORT" of every health probe, smoke request and load; a probe or smoke request
  /// reaches a unit only where it listens (its bind address, or every address).
  std::vector<std::string> dialed;
  /// The executor runs a plan's downloads on threads of their own: the fake store takes this
  /// while it records one (two unlocked push_backs once corrupted the heap under ctest -j2).
  std::mutex download_mu;

  // Faults, by unit name.
  std::set<std::string> fail_start;          // the start job fails; the unit ends "failed"
  std::set<std::string> crash_loop;          // starts, then exits and is restarted by systemd
  std::set<std::string> never_healthy;       // runs, but the health path never answers 200
  std::map<std::string, int> healthy_after;  // answers 200 from the Nth probe on (1-based)
  std::set<std::string> fail_download;       // repo ids whose download fails
  std::set<std::string> smoke_empty;         // units whose smoke request answers empty text
  /// What a throughput floor's load measures, by port (default: 1000 tok/s, TTFT 50/80 ms;
  /// recorded as "load PORT" in calls).
  std::map<int, LoadFigures> load_figures;
  /// Figures for the next loads on a port, one per load, before load_figures (a relative
  /// floor's reference on the old service, then its gate on the new one, both on port 8000).
  std::map<int, std::deque<LoadFigures>> load_sequence;
  std::map<std::string, int> fail_commands;  // argv[0] -> the exit status it fails with
  /// argv[0] -> what a failing command prints (default "ValueError: unsupported architecture").
  std::map<std::string, std::string> fail_output;
  /// The environment each command was given (empty: berth's own), in the order of the calls.
  std::vector<std::vector<std::string>> command_envs;
  /// Called at the start of every systemd job with its verb and unit (tests set `stop` here).
  std::function<void(const std::string& verb, const std::string& unit)> on_job;
  /// Called at every smoke request (before it is answered).
  std::function<void()> smoke_hook;

  FakeSystemd systemd{this};
  FakeUnitFiles unit_files{this};
  FakeModelStore models{this};
  FakeHealth health{this};
  FakeSmoke smoke{this};
  FakeCommands commands{this};
  FakeObserver observer{this};
  std::map<std::string, int> probes;  // per unit
};

}  // namespace berth::testing
