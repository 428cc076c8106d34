// libFuzzer target for the manifest loader. The input is split at NUL bytes into up to four
// files, so merging across files is fuzzed too. Beyond "no crash, no sanitizer report", it
// checks what callers rely on: diagnostics come sorted, and a manifest without diagnostics keeps
// the cross-reference rules.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "manifests/loader.h"

namespace {

void Check(bool condition) {
  if (!condition) std::abort();
}

void CheckSorted(const std::vector<std::pair<std::string, std::string>>& files,
                 const berth::LoadResult& r) {
  std::map<std::string, int> order;
  for (const auto& [name, text] : files) order.emplace(name, static_cast<int>(order.size()));
  std::tuple<int, int, int> previous{-2, 0, 0};
  for (const berth::Diagnostic& d : r.diagnostics) {
    Check(!d.message.empty());
    Check(d.loc.line >= 0 && d.loc.column >= 0);
    Check(!d.ToString().empty());
    auto it = order.find(d.loc.file);
    std::tuple<int, int, int> key{it == order.end() ? -1 : it->second, d.loc.line, d.loc.column};
    Check(previous <= key);
    previous = key;
  }
}

void CheckValidManifest(const berth::Desired& desired) {
  std::set<int> running_ports;
  for (const auto& [name, s] : desired.services) {
    Check(name == s.name);
    if (!s.model.empty()) Check(desired.models.count(s.model) == 1);
    if (s.state == berth::ServiceState::kRunning && s.port) {
      Check(running_ports.insert(*s.port).second);
    }
    if (!s.has_engine) continue;
    if (s.engine == berth::EngineKind::kVllm) {
      Check(static_cast<size_t>(s.vllm.tensor_parallel_size * s.vllm.pipeline_parallel_size) ==
            s.gpus.size());
    }
    if (s.engine == berth::EngineKind::kSglang) {
      Check(static_cast<size_t>(s.sglang.tp_size) == s.gpus.size());
    }
    if (s.engine == berth::EngineKind::kCommand) Check(!s.command.empty());
  }
  for (const auto& [name, m] : desired.models) Check(!m.repo_id.empty());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  std::vector<std::pair<std::string, std::string>> files;
  size_t start = 0;
  while (files.size() < 4) {
    size_t end = files.size() == 3 ? std::string::npos : input.find('\0', start);
    files.emplace_back("f" + std::to_string(files.size()) + ".yaml",
                       input.substr(start, end == std::string::npos ? end : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  berth::LoadResult r = berth::LoadManifestTexts(files);
  CheckSorted(files, r);
  if (r.ok()) CheckValidManifest(r.desired);
  return 0;
}
