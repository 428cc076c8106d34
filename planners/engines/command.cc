// engine: command: the operator's own server, run as `command:` says. berth renders nothing of
// its command line, so `args` may say anything.
#include "planners/engines/adapters.h"

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
};

}  // namespace

const EngineAdapter& Command() {
  static const CommandAdapter a;
  return a;
}

}  // namespace berth::engines
