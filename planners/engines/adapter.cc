#include "planners/engines/adapter.h"

#include "planners/engines/adapters.h"

namespace berth {

std::string EngineAdapter::ReportedName(const ServiceSpec& s, const RenderContext&) const {
  return s.ServedName();
}

std::optional<EngineRefusal> EngineAdapter::GpuCountProblem(const ServiceSpec&, size_t) const {
  return std::nullopt;
}

std::optional<WeightSplit> EngineAdapter::Split(const ServiceSpec&) const { return std::nullopt; }

std::optional<std::pair<double, std::string>> EngineAdapter::MemoryShare(const ServiceSpec&) const {
  return std::nullopt;
}

const EngineAdapter& AdapterFor(EngineKind e) {
  switch (e) {
    case EngineKind::kVllm:
      return engines::Vllm();
    case EngineKind::kSglang:
      return engines::Sglang();
    case EngineKind::kLlamaServer:
      return engines::LlamaServer();
    case EngineKind::kCommand:
      break;
  }
  return engines::Command();
}

std::string ResolveExecutable(const ServiceSpec& s,
                              const std::map<std::string, std::string>& host) {
  if (!s.executable.empty()) return s.executable;
  auto it = host.find(EngineName(s.engine));
  if (it != host.end()) return it->second;
  return AdapterFor(s.engine).DefaultExecutable();
}

std::vector<std::string> ServiceArgv(const ServiceSpec& s, const RenderContext& ctx) {
  std::vector<std::string> a = AdapterFor(s.engine).Argv(s, ctx);
  a.insert(a.end(), s.args.begin(), s.args.end());
  return a;
}

std::optional<ArgConflict> FindOwnedFlag(const ServiceSpec& s,
                                         const std::vector<std::string>& args) {
  std::vector<OwnedFlag> owned = AdapterFor(s.engine).OwnedFlags(s);
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg.size() < 2 || arg[0] != '-') continue;
    for (const OwnedFlag& f : owned)
      for (const std::string& spelling : f.spellings) {
        // "--port 9000" and "--port=9000"; a short flag glued to its value ("-tp4") is not
        // matched: argparse would not read it as -tp either.
        bool named =
            arg == spelling || (arg.starts_with(spelling) && arg.size() > spelling.size() &&
                                arg[spelling.size()] == '=');
        if (named) return ArgConflict{i, spelling, f.set_by};
      }
  }
  return std::nullopt;
}

}  // namespace berth
