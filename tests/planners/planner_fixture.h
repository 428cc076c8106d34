// A world to plan against, built in a few lines per scenario.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/desired.h"
#include "core/observed.h"
#include "core/plan.h"
#include "planners/planner.h"
#include "tests/support/fake_host.h"

namespace berth::testing {

class PlannerTest : public ::testing::Test {
 protected:
  PlannerTest() {
    o.hostname = "gpu-01";
    o.store.path = "/models";
    o.store.total_bytes = 2'000'000'000'000;
    o.store.free_bytes = 1'000'000'000'000;
    d.host.store = "/models";
    d.files = {"berth.yaml"};
  }

  /// `n` GPUs of `memory` bytes each, nothing on them.
  void Gpus(int n, uint64_t memory) {
    for (int i = 0; i < n; ++i)
      o.gpus.push_back({i, "GPU-" + std::to_string(i), "NVIDIA H200", memory, 0, {}});
  }
  ModelSpec& Model(const std::string& name, const std::string& repo,
                   std::optional<uint64_t> size = std::nullopt) {
    ModelSpec& m = d.models[name];
    m.name = name;
    m.repo_id = repo;
    m.size_hint = size;
    return m;
  }
  /// A service of `engine` on `gpus` and `port`; the engine's own options are left to the caller.
  ServiceSpec& Service(const std::string& name, EngineKind engine, const std::string& model,
                       std::vector<int> gpus, int port) {
    ServiceSpec& s = d.services[name];
    s.name = name;
    s.has_engine = true;
    s.engine = engine;
    s.model = model;
    s.gpus = std::move(gpus);
    s.port = port;
    return s;
  }
  ServiceSpec& Vllm(const std::string& name, const std::string& model, std::vector<int> gpus,
                    int port, double gmu = 0.9) {
    ServiceSpec& s = Service(name, EngineKind::kVllm, model, std::move(gpus), port);
    s.vllm.tensor_parallel_size = static_cast<int>(s.gpus.size());
    s.vllm.gpu_memory_utilization = gmu;
    return s;
  }
  /// A state-only entry: berth starts or stops a unit it does not write.
  ServiceSpec& StateOnly(const std::string& name, ServiceState state) {
    ServiceSpec& s = d.services[name];
    s.name = name;
    s.state = state;
    return s;
  }
  void Hub(const std::string& repo, const std::string& revision, const std::string& commit,
           uint64_t bytes) {
    o.hub.push_back({repo, revision, commit, {{"model.safetensors", bytes}, {"config.json", 0}}});
  }
  ObservedRevision& InStore(const std::string& repo, const std::string& commit, uint64_t bytes,
                            bool complete = true, std::vector<std::string> refs = {"main"},
                            bool by_berth = true) {
    ObservedRepo* r = nullptr;
    for (auto& x : o.store.repos)
      if (x.repo_id == repo) r = &x;
    if (!r) {
      o.store.repos.push_back({repo, {}});
      r = &o.store.repos.back();
    }
    r->revisions.push_back({commit, std::move(refs), complete, bytes,
                            complete ? std::optional<uint64_t>(bytes) : std::nullopt, std::nullopt,
                            std::nullopt, std::nullopt, std::nullopt});
    if (by_berth) o.state.models[repo].push_back(commit);
    return r->revisions.back();
  }
  /// A unit berth did not write, running and holding `per_gpu` on `gpus` and `port`.
  void ForeignService(const std::string& unit, std::vector<int> gpus, uint64_t per_gpu, int port,
                      bool active = true) {
    ObservedUnit u;
    u.name = unit;
    u.load_state = "loaded";
    u.active_state = active ? "active" : "inactive";
    u.sub_state = active ? "running" : "dead";
    u.fragment_path = "/etc/systemd/system/" + unit;
    u.content_hash = "hand-written";
    u.main_pid = active ? 4000 : 0;
    o.units.push_back(u);
    if (!active) return;
    for (int i : gpus) Hold(i, 4100 + i, per_gpu, unit);
    if (port) o.ports.push_back({port, "0.0.0.0", 4000, "vllm", unit});
  }
  /// A process holding GPU memory; unit "" = outside any unit.
  void Hold(int gpu, int pid, uint64_t bytes, const std::string& unit = "") {
    for (auto& g : o.gpus)
      if (g.index == gpu) {
        g.processes.push_back({pid, bytes, unit, "python3"});
        g.memory_used += bytes;
      }
  }

  Plan PlanNow() { return MakePlan(d, o); }

  /// Plans, acts the plan out on a FakeHost, and checks that the next plan is empty.
  Plan Converge() {
    Plan p = PlanNow();
    EXPECT_FALSE(p.blocked()) << Problems(p);
    if (p.blocked()) return p;
    FakeHost host(o);
    host.Apply(p, d);
    o = host.observed();
    Plan again = PlanNow();
    EXPECT_TRUE(again.empty()) << "not converged; next plan:\n"
                               << ::testing::PrintToString(Steps(again));
    return p;
  }

  static std::string Problems(const Plan& p) {
    std::string s;
    for (const auto& x : p.problems)
      s += "step " + std::to_string(x.step ? *x.step + 1 : 0) + " " + x.resource + ": " +
           x.message + "\n";
    return s;
  }
  static const Action& At(const Plan& p, const std::string& step_text) {
    auto steps = Steps(p);
    for (size_t i = 0; i < steps.size(); ++i)
      if (steps[i] == step_text) return p.actions[i];
    ADD_FAILURE() << "no step '" << step_text << "' in " << ::testing::PrintToString(steps);
    static Action none;
    return none;
  }

  Desired d;
  Observed o;
};

}  // namespace berth::testing
