#include "planners/feasibility.h"

#include <algorithm>
#include <tuple>

#include "core/units.h"

namespace berth {
namespace {

bool Contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

}  // namespace

std::string GpuList(const std::vector<int>& gpus) {
  // "0-7", "0,2", "3"
  std::vector<int> g = gpus;
  std::sort(g.begin(), g.end());
  std::string out;
  for (size_t i = 0; i < g.size();) {
    size_t j = i;
    while (j + 1 < g.size() && g[j + 1] == g[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(g[i]);
    // Appended, not out += "-" + std::to_string(...): g++ 12 -O3 warns falsely on the
    // temporary (-Wrestrict, GCC bug 105329).
    if (j > i + 1)
      out.append("-").append(std::to_string(g[j]));
    else if (j == i + 1)
      out.append(",").append(std::to_string(g[j]));
    i = j + 1;
  }
  return out;
}

std::optional<Problem> DiskShortfall(const DiskBudget& disk, uint64_t needed, size_t step) {
  uint64_t available = disk.available();
  if (needed <= available) return std::nullopt;
  Problem p;
  p.step = step;
  p.resource = "disk";
  p.needed = needed;
  p.available = available;
  p.message = "downloads up to step " + std::to_string(step + 1) + " need " + FormatBytes(needed) +
              " but the store has " + FormatBytes(disk.free) + " free − " +
              FormatSize(disk.reserve) + " reserve = " + FormatBytes(available) + ": short by " +
              FormatBytes(needed - available) + " (" + std::to_string(needed - available) +
              " bytes). Free space in " + disk.store_path + ", lower host.reserve, or drop a model";
  return p;
}

StartNeeds NeedsOf(const Transition& t, HostLedger& host, const PendingUnits& pending) {
  StartNeeds n;
  const ServiceSpec& s = *t.spec;
  auto add = [&](const std::string& u) {
    if (!Contains(n.stops, u)) n.stops.push_back(u);
  };
  if (s.port) {
    std::string h = host.PortHolder(*s.port);
    if (!h.empty() && h != t.unit) {
      // A holder that restarts later (ports swapped between services) is stopped first and
      // started instead of restarted.
      if (pending.stop(h) || pending.restart(h)) {
        add(h);
        n.why.push_back("port " + std::to_string(*s.port) + " is held by " + h + " until it stops");
      } else {
        Problem p;
        p.resource = "port " + std::to_string(*s.port);
        p.message = t.address + " needs port " + std::to_string(*s.port) + ", held by " + h +
                    ", which the manifest does not stop: stop it, or choose another port";
        n.problems.push_back(p);
      }
    }
  }
  for (int i : s.gpus) {
    if (!host.gpus_known()) break;
    if (!host.HasGpu(i)) {
      Problem p;
      p.resource = "gpu " + std::to_string(i);
      p.message = t.address + " asks for GPU " + std::to_string(i) + ", which this host " +
                  "does not have (" + std::to_string(host.gpu_count()) + " GPUs)";
      n.problems.push_back(p);
      continue;
    }
    uint64_t claim = host.Claim(s, i);
    uint64_t free = host.Free(i);
    // A restart gives back its own memory first; a wake holds its residue while asleep.
    const auto& holders = host.Holders(i);
    if (t.kind == ActionKind::kRestart || t.kind == ActionKind::kWake) {
      auto it = holders.find(t.unit);
      if (it != holders.end()) free += it->second;
    }
    for (const auto& u : n.stops) {
      auto it = holders.find(u);
      if (it != holders.end()) free += it->second;
    }
    if (free >= claim) continue;
    // Largest pending holders first, names breaking ties, until the claim fits.
    std::vector<std::pair<uint64_t, std::string>> candidates;
    for (const auto& [h, b] : holders)
      if (pending.stop(h) && !Contains(n.stops, h)) candidates.emplace_back(b, h);
    std::sort(candidates.begin(), candidates.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first > b.first : a.second < b.second;
    });
    for (const auto& [b, h] : candidates) {
      if (free >= claim) break;
      add(h);
      free += b;
    }
    if (free >= claim) continue;
    Problem p;
    p.resource = "gpu " + std::to_string(i);
    p.needed = claim;
    p.available = free;
    std::string others;
    for (const auto& [h, b] : holders) {
      if (h == t.unit || Contains(n.stops, h)) continue;
      others += (others.empty() ? "" : ", ") + h + " holds " + FormatGiB(b);
    }
    p.message = t.address + " needs " + FormatGiB(claim) + " on GPU " + std::to_string(i) +
                " (of " + FormatGiB(host.Total(i)) + "), only " + FormatGiB(free) +
                " can be freed: short by " + FormatGiB(claim - free) +
                (others.empty() ? "" : "; " + others + ", not stopped by this plan") +
                ". Stop or move what holds it, or " +
                (host.Derived(t.unit)
                     ? "lower what it claims, derived from its GGUF file (see its start): a "
                       "smaller llama_server.ctx_size, a quantized KV cache (cache_type_k and "
                       "cache_type_v q8_0), fewer n_gpu_layers, or gpu_memory: to claim a "
                       "figure of your own"
                     : "lower the service's memory share");
    n.problems.push_back(p);
  }
  // Why: each GPU short of the claim while the units to stop run, by how much; GPUs with the
  // same figures together: (claim, free, who runs) -> GPUs.
  std::vector<std::pair<std::tuple<uint64_t, uint64_t, std::string>, std::vector<int>>> short_on;
  for (int i : s.gpus) {
    if (!host.gpus_known() || !host.HasGpu(i)) continue;
    uint64_t claim = host.Claim(s, i);
    uint64_t free = host.Free(i);
    const auto& holders = host.Holders(i);
    if (t.kind == ActionKind::kRestart || t.kind == ActionKind::kWake)
      if (auto it = holders.find(t.unit); it != holders.end()) free += it->second;
    if (free >= claim) continue;
    std::vector<std::string> who;
    for (const auto& u : n.stops)
      if (auto it = holders.find(u); it != holders.end() && it->second > 0) who.push_back(u);
    if (who.empty()) continue;
    std::string runs;
    for (size_t k = 0; k < who.size(); ++k)
      runs += (k == 0 ? "" : k + 1 == who.size() ? " and " : ", ") + who[k];
    auto key = std::make_tuple(claim, free, runs + (who.size() == 1 ? " runs" : " run"));
    auto same = std::find_if(short_on.begin(), short_on.end(),
                             [&](const auto& e) { return e.first == key; });
    if (same == short_on.end())
      short_on.push_back({key, {i}});
    else
      same->second.push_back(i);
  }
  for (const auto& [key, gpus] : short_on) {
    const auto& [claim, free, who] = key;
    n.why.push_back("GPU " + GpuList(gpus) + ": needs " + FormatGiB(claim) +
                    (gpus.size() > 1 ? " each" : "") + ", " + FormatGiB(free) + " free while " +
                    who);
  }
  return n;
}

std::vector<std::string> ReplacedBy(const Transition& t, HostLedger& host,
                                    const PendingUnits& pending) {
  std::vector<std::string> out;
  if (!pending.any_stop) return out;
  const ServiceSpec& s = *t.spec;
  auto add = [&](const std::string& u) {
    if (pending.stop(u) && !Contains(out, u)) out.push_back(u);
  };
  if (s.port) add(host.PortHolder(*s.port));
  for (int i : s.gpus)
    if (host.HasGpu(i))
      for (const auto& [h, b] : host.Holders(i)) add(h);
  return out;
}

}  // namespace berth
