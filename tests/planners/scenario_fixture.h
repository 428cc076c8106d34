// ScenarioTest: PlannerTest plus helpers for the scenario files (a model with its service, a
// berth unit's content, hand edits, GPU holds, sglang and command services).
#pragma once

#include <string>

#include "core/hash.h"
#include "planners/unit_render.h"
#include "tests/planners/planner_fixture.h"

namespace berth::testing {

class ScenarioTest : public PlannerTest {
 protected:
  /// One 141 GiB GPU per index asked, model "a" complete in the store.
  void OneModel(int gpus = 1) {
    Gpus(gpus, GiB(141));
    // Pinned to the commit in the store, so that no warning says it is not pinned.
    Model("a", "org/a").revision = Commit("a");
    InStore("org/a", Commit("a"), 1000);
  }
  /// Model `name` (repo org/<name>), pinned, complete in the store with `weights` of
  /// safetensors.
  void StoredModel(const std::string& name, uint64_t weights) {
    Model(name, "org/" + name).revision = Commit(name);
    InStore("org/" + name, Commit(name), weights).weights_bytes = weights;
  }
  /// Host memory as /proc/meminfo would say.
  void Memory(uint64_t total, uint64_t available) {
    o.memory.known = true;
    o.memory.total_bytes = total;
    o.memory.available_bytes = available;
  }
  ObservedUnit& UnitOf(const std::string& name) {
    for (auto& u : o.units)
      if (u.name == name) return u;
    ADD_FAILURE() << "no unit " << name;
    static ObservedUnit none;
    return none;
  }
  /// Replaces `from` by `to` in a managed unit's file, as a hand edit would.
  void EditUnit(const std::string& name, const std::string& from, const std::string& to) {
    ObservedUnit& u = UnitOf(name);
    size_t at = u.content.find(from);
    ASSERT_NE(at, std::string::npos) << from << " not in\n" << u.content;
    u.content.replace(at, from.size(), to);
    u.content_hash = Sha256Hex(u.content);
  }
  /// Forgets what a unit holds (GPU memory, ports), as when its process died.
  void DropHolds(const std::string& unit) {
    for (auto& g : o.gpus) {
      for (const auto& p : g.processes)
        if (p.unit == unit) g.memory_used -= p.used_bytes;
      std::erase_if(g.processes, [&](const GpuProcess& p) { return p.unit == unit; });
    }
    std::erase_if(o.ports, [&](const ListeningPort& p) { return p.unit == unit; });
  }
  ServiceSpec& Sglang(const std::string& name, const std::string& model, std::vector<int> gpus,
                      int port, double fraction) {
    ServiceSpec& s = Service(name, EngineKind::kSglang, model, std::move(gpus), port);
    s.sglang.tp_size = static_cast<int>(s.gpus.size());
    s.sglang.mem_fraction_static = fraction;
    return s;
  }
  ServiceSpec& Command(const std::string& name, std::vector<int> gpus, int port, uint64_t per_gpu) {
    ServiceSpec& s = Service(name, EngineKind::kCommand, "", std::move(gpus), port);
    s.command = {"/opt/srv/bin/serve", "--listen", std::to_string(port)};
    s.gpu_memory = per_gpu;
    return s;
  }
};

// ---- stopped and absent services ----------------------------------------------------------

}  // namespace berth::testing
