// The host's GPU memory and listening ports as the sequence changes them: who holds what now,
// and what a stop gives back or a start takes. Internal to planners/.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/desired.h"
#include "core/observed.h"
#include "core/plan.h"

namespace berth {

class PlanIndex;

/// What must be free on each of a service's GPUs (of `total` bytes) when it starts: its engine's
/// memory share, else its gpu_memory (for a state-only service: declared or as berth saw it run;
/// 0 when unknown). HostLedger::Claim adds what berth derives where neither says.
uint64_t GpuClaim(const ServiceSpec& service, uint64_t total);

class HostLedger {
 public:
  /// Starts from what was observed. Without a GPU observation, the manifest's host.gpus stands
  /// in, with berth's own running services as the only holders; without a port observation,
  /// the running services of the manifest hold their ports. `derived`: unit -> the claim per
  /// GPU berth derived for a service that declares none (a llama-server's, from its GGUF).
  HostLedger(const Desired& desired, const PlanIndex& index,
             std::map<std::string, uint64_t> derived = {});

  /// What `service` needs free on `gpu` when it starts: GpuClaim, else (0) what was derived.
  uint64_t Claim(const ServiceSpec& service, int gpu) const;
  /// Whether the claim of `unit` is derived (not declared nor an engine's share).
  bool Derived(const std::string& unit) const { return derived_.count(unit) > 0; }

  /// Whether GPU memory can be checked at all.
  bool gpus_known() const { return known_; }
  size_t gpu_count() const { return total_.size(); }
  /// The indexes of the GPUs it knows, in order.
  std::vector<int> Gpus() const {
    std::vector<int> gpus;
    for (const auto& [gpu, bytes] : total_) gpus.push_back(gpu);
    return gpus;
  }
  bool HasGpu(int gpu) const { return total_.count(gpu) > 0; }
  uint64_t Total(int gpu) const { return total_.at(gpu); }
  uint64_t Free(int gpu) const;
  /// Bytes held on `gpu` by each holder: a unit, "pid N (name)", or memory no process claims.
  const std::map<std::string, uint64_t>& Holders(int gpu) { return held_[gpu]; }
  /// The holder of `port`, "" when it is free.
  std::string PortHolder(int port) const;

  /// Releases everything `holder` holds; returns what it gave back.
  Resources Release(const std::string& holder);
  void Hold(const std::string& holder, const Resources& resources);

 private:
  bool known_;
  std::map<std::string, uint64_t> derived_;
  std::map<int, uint64_t> total_;
  std::map<int, std::map<std::string, uint64_t>> held_;
  std::map<int, uint64_t> used_;  // GPU -> the sum of held_ on it
  std::multimap<int, std::string> ports_;
  std::unordered_map<std::string, std::vector<int>> ports_of_;  // holder -> its keys in ports_

  void HoldGpu(int gpu, const std::string& holder, uint64_t bytes);
  void HoldPort(int port, const std::string& holder);
};

}  // namespace berth
