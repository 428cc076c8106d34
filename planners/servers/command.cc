// engine: command: the operator's own server, run as `command:` says. berth renders nothing of
// its command line, so `args` may say anything. Which model id it lists in /v1/models is the
// manifest's `served_name:` (trtllm-serve lists its model folder's name, TGI its model id); without
// it berth cannot know, and the health gate checks the health path alone.
#include "planners/servers/adapters.h"

namespace berth::engines {
namespace {

class CommandAdapter final : public EngineAdapter {
 public:
  EngineKind kind() const override { return EngineKind::kCommand; }
  std::string DefaultExecutable() const override { return ""; }
  std::vector<std::string> Argv(const ServiceSpec& s, const RenderContext&) const override {
    return s.command;
  }
  std::vector<OwnedFlag> OwnedFlags(const ServiceSpec&) const override { return {}; }
  std::string ReportedName(const ServiceSpec& s, const RenderContext&) const override {
    return s.served_name;
  }
};

}  // namespace

const EngineAdapter& Command() {
  static const CommandAdapter a;
  return a;
}

}  // namespace berth::engines
