#include "planners/servers/adapter.h"

#include "planners/servers/adapters.h"
#include "planners/servers/catalogue.h"

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

std::optional<EngineRefusal> EngineAdapter::ModelConfigProblem(const ServiceSpec&,
                                                               const ModelConfig&) const {
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
    case EngineKind::kTrtllm:
      return engines::Trtllm();
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

namespace {

// The catalogue of an engine whose parser berth knows; nullopt for engine: command.
const EngineCatalogue* CatalogueOf(EngineKind e) {
  switch (e) {
    case EngineKind::kVllm:
      return &Catalogue(CatalogueEngine::kVllm);
    case EngineKind::kSglang:
      return &Catalogue(CatalogueEngine::kSglang);
    case EngineKind::kLlamaServer:
      return &Catalogue(CatalogueEngine::kLlamaServer);
    case EngineKind::kTrtllm:
      return &Catalogue(CatalogueEngine::kTrtllm);
    case EngineKind::kCommand:
      break;
  }
  return nullptr;
}

// Python's argparse (vLLM, SGLang) takes a unique prefix of a long option as that option
// (allow_abbrev, on by default and left on by both).
bool TakesAbbreviations(EngineKind e) { return e == EngineKind::kVllm || e == EngineKind::kSglang; }

// The flag `arg` names, as the engine's parser reads it: its canonical name, or "" for none.
std::string Canonical(const EngineCatalogue& c, EngineKind e, std::string_view arg) {
  std::string_view name = arg.substr(0, arg.find('='));
  // vLLM reads --json-arg.key value as a part of --json-arg (FlexibleArgumentParser).
  if (e == EngineKind::kVllm && name.starts_with("--")) name = name.substr(0, name.find('.'));
  if (const CatalogueFlag* f = c.Find(name)) return f->name;
  if (!TakesAbbreviations(e) || !name.starts_with("--") || name.size() < 3) return "";
  std::string found;
  for (const CatalogueFlag& f : c.flags) {
    bool prefix = std::string_view(f.name).starts_with(name);
    for (const std::string& alias : f.aliases)
      prefix = prefix || (alias.starts_with("--") && std::string_view(alias).starts_with(name));
    if (!prefix) continue;
    if (!found.empty() && found != f.name) return "";  // ambiguous: argparse refuses it itself
    found = f.name;
  }
  return found;
}

}  // namespace

std::optional<ArgConflict> FindOwnedFlag(const ServiceSpec& s,
                                         const std::vector<std::string>& args) {
  std::vector<OwnedFlag> owned = AdapterFor(s.engine).OwnedFlags(s);
  const EngineCatalogue* c = CatalogueOf(s.engine);
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg.size() < 2 || arg[0] != '-') continue;
    // Through the engine's catalogue: every spelling its parser accepts (aliases, --no-x,
    // underscores, --x=value, a unique prefix, vLLM's --x.key).
    std::string named = c ? Canonical(*c, s.engine, arg) : "";
    for (const OwnedFlag& f : owned)
      for (const std::string& spelling : f.spellings) {
        // Without a catalogue entry: "--port 9000" and "--port=9000" as written.
        bool same = arg == spelling || (arg.starts_with(spelling) && arg.size() > spelling.size() &&
                                        arg[spelling.size()] == '=');
        if (!same && !named.empty() && c) {
          const CatalogueFlag* o = c->Find(spelling);
          same = o && o->name == named;
        }
        if (same) return ArgConflict{i, arg.substr(0, arg.find('=')), f.set_by};
      }
  }
  return std::nullopt;
}

}  // namespace berth
