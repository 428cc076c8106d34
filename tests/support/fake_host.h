// An in-memory host that acts out plans on an Observed: downloads complete, units are written
// and flip states, GPU memory and ports are taken and given back. For planner and executor
// tests of the "converge, then prove nothing is left" shape.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/desired.h"
#include "core/observed.h"
#include "core/plan.h"

namespace berth::testing {

class FakeHost {
 public:
  explicit FakeHost(Observed observed) : o_(std::move(observed)) {}

  const Observed& observed() const { return o_; }
  Observed& mutable_observed() { return o_; }

  /// Carries out every action of `plan` in order (it must not be blocked); `desired` gives the
  /// claims of started services and the sizes of downloads.
  void Apply(const Plan& plan, const Desired& desired);

  /// Log of the actions carried out: "start vllm-x.service".
  const std::vector<std::string>& log() const { return log_; }

  // One action each, as the fake providers of the executor tests carry them out.
  /// What a download brings: its files on the Hub as observed (include/exclude applied), else
  /// nothing (the caller adds the manifest's size hint).
  uint64_t DownloadSize(const DownloadStep& a, const Desired& d) const;
  void Download(const DownloadStep& a, const Desired& d);
  void RemoveModel(const std::string& repo_id, const std::string& commit);
  void WriteUnit(const std::string& unit, const std::string& content);
  void RemoveUnit(const std::string& unit);
  void Reload();
  /// The unit runs: a main pid, its GPU claims and its port (from `d`'s service of that unit;
  /// a unit berth did not write holds again what it held when it was last stopped).
  void Start(const std::string& unit, const Desired& d);
  void Stop(const std::string& unit);
  /// enable / disable: "enabled" or "disabled", as systemd's [Install] symlinks say.
  void SetUnitFileState(const std::string& unit, const std::string& state);
  /// systemd's garbage collection: inactive units without a file are forgotten.
  void CollectGarbage();
  ObservedUnit& Unit(const std::string& name);

 private:
  struct Held {
    std::vector<ListeningPort> ports;
    std::vector<std::pair<int, GpuProcess>> gpus;  // GPU index, process
  };
  Observed o_;
  std::map<std::string, Held> held_by_foreign_;  // unit -> what it held when last stopped
  std::vector<std::string> log_;
  int next_pid_ = 5000;
};

/// GiB in bytes.
constexpr uint64_t GiB(double n) { return static_cast<uint64_t>(n * 1073741824.0); }

/// A 40-hex commit made from a short tag, for readable tests: Commit("a") = "aaaa...".
std::string Commit(const std::string& tag);

/// "download model/x model_missing" per action, to compare a plan's order and reasons.
std::vector<std::string> Steps(const Plan& plan);

}  // namespace berth::testing
