// The fixture of the Reconciler tests on an in-memory host (tests/support/fake_world.h): Kimi
// on GPU 0 and port 8000, the manifests that switch it to MiniMax, and one pass through the
// Reconciler as `berth apply --yes` or `berth plan` runs it.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>

#include "engine/apply/reconciler.h"
#include "engine/cli/commands.h"
#include "tests/providers/temp_dir.h"
#include "tests/support/fake_world.h"

namespace berth::testing {

inline const std::string kKimi = Commit("a");
inline const std::string kMiniMax = Commit("b");

// Kimi serving on GPU 0 and port 8000; `switched`: MiniMax there instead, Kimi stopped (its
// weights kept).
inline std::string Manifest(bool switched, const std::string& kimi_extra = "") {
  std::string kimi_state = switched ? "stopped" : "running";
  std::string m = "berth: 1\nhost: {store: /models}\nmodels:\n";
  m += "  kimi: {source: hf://moonshotai/Kimi-K2, revision: " + kKimi + ", size: 20GB}\n";
  if (switched)
    m += "  minimax: {source: hf://MiniMaxAI/MiniMax-M2, revision: " + kMiniMax + ", size: 20GB}\n";
  m += "services:\n"
       "  vllm-kimi:\n"
       "    model: kimi\n"
       "    engine: vllm\n"
       "    state: " +
       kimi_state +
       "\n"
       "    gpus: [0]\n"
       "    port: 8000\n"
       "    vllm: {gpu_memory_utilization: 0.9}\n"
       "    health: {timeout: 10m, interval: 5s}\n" +
       kimi_extra;
  if (switched)
    m += "  vllm-minimax:\n"
         "    model: minimax\n"
         "    engine: vllm\n"
         "    gpus: [0]\n"
         "    port: 8000\n"
         "    vllm: {gpu_memory_utilization: 0.9}\n"
         "    health: {timeout: 10m, interval: 5s}\n";
  return m;
}

inline Observed EmptyHost() {
  Observed o;
  o.hostname = "gpu-01";
  o.store.path = "/models";
  o.store.exists = true;
  o.store.total_bytes = 2'000'000'000'000;
  o.store.free_bytes = 1'000'000'000'000;
  o.gpus.push_back({0, "GPU-0", "NVIDIA H200", GiB(80), 0, {}});
  return o;
}

class ReconcilerTest : public ::testing::Test {
 protected:
  ReconcilerTest() : world(EmptyHost()) {
    dir.Write("kimi/berth.yaml", Manifest(false));
    dir.Write("minimax/berth.yaml", Manifest(true));
    dir.Write("none/berth.yaml", "berth: 1\nhost: {store: /models}\nservices: {}\n");
    dir.Write("kimi-longer/berth.yaml",
              Manifest(false, "    args: [\"--max-num-seqs\", \"64\"]\n"));
  }

  // One pass through the Reconciler, as `berth apply --yes` (apply) or `berth plan` runs it.
  RunReport Pass(const std::string& manifest, bool apply, PlanFormat format = PlanFormat::kText,
                 const std::string& state = "state") {
    out.str("");
    err.str("");
    Reporter say(out, err, format);
    ReconcileOptions o;
    o.manifest_path = dir / (manifest + "/berth.yaml");
    o.state_dir = dir / state;
    o.apply = apply;
    o.yes = true;
    o.retry = retry;
    o.stop = &stop;
    return Reconciler(world.Deps(&say)).Run(o);
  }
  RunReport Apply(const std::string& manifest) { return Pass(manifest, true); }

  // kill -9 as step `k` of an apply of `manifest` begins (what berth_faulty does in the e2e
  // tests): the apply runs through the Reconciler, and the host and the state directory are
  // put back as they were at that moment, its journal saying step k runs. Whether step k came.
  bool KillAt(const std::string& manifest, int k, const std::string& state = "state") {
    out.str("");
    err.str("");
    Reporter say(out, err, PlanFormat::kText);
    ReconcileOptions o;
    o.manifest_path = dir / (manifest + "/berth.yaml");
    o.state_dir = dir / state;
    o.apply = true;
    o.yes = true;
    o.stop = &stop;
    std::optional<FakeHost> host;
    std::map<std::string, std::optional<std::string>> files;
    ReconcilerDeps d = world.Deps(&say);
    d.at_step = [&](int step) {
      if (step != k || host) return;
      host = world.host;
      for (const char* f : {"state.json", "journal.json"}) {
        std::string path = dir / (state + "/" + f);
        files[path] = std::filesystem::exists(path) ? std::optional<std::string>(ReadAll(path))
                                                    : std::nullopt;
      }
    };
    Reconciler(d).Run(o);
    if (!host) return false;
    world.host = *host;
    for (const auto& [path, content] : files) {
      if (content)
        std::ofstream(path, std::ios::trunc | std::ios::binary) << *content;
      else
        std::filesystem::remove(path);
    }
    world.calls.clear();
    world.probes.clear();
    return true;
  }
  static std::string ReadAll(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }
  // The 1-based step of the first action of `kind` at `address` in `plan` (0: none).
  static int StepOf(const berth::Plan& plan, ActionKind kind, const std::string& address) {
    for (size_t i = 0; i < plan.actions.size(); ++i)
      if (plan.actions[i].kind == kind && plan.actions[i].address == address)
        return static_cast<int>(i + 1);
    return 0;
  }
  RunReport Plan(const std::string& manifest) { return Pass(manifest, false); }

  const ObservedUnit* Unit(const std::string& name) { return world.host.observed().FindUnit(name); }
  bool Running(const std::string& name) {
    const ObservedUnit* u = Unit(name);
    return u && u->active_state == "active";
  }
  bool JournalLeft() { return std::filesystem::exists(dir / "state/journal.json"); }
  int64_t SecondsSlept() { return world.clock.Elapsed().count() / 1000; }

  size_t Count(const std::string& call) const {
    return static_cast<size_t>(std::count(world.calls.begin(), world.calls.end(), call));
  }

  TempDir dir;
  bool retry = false;  // berth apply --retry
  FakeWorld world;
  std::atomic<bool> stop{false};
  std::ostringstream out, err;
};

}  // namespace berth::testing
