#include "core/untrusted_text.h"
#include "engine/cli/cli_support.h"
#include "engine/cli/commands.h"

namespace berth {

int RunValidate(const std::string& manifest_path, std::ostream& out, std::ostream& err) {
  Desired desired;
  if (!LoadManifestOrExplain(manifest_path, &desired, err)) return kExitError;
  out << EscapeLine(manifest_path) << ": valid (" << desired.models.size() << " model"
      << (desired.models.size() == 1 ? "" : "s") << ", " << desired.services.size() << " service"
      << (desired.services.size() == 1 ? "" : "s") << ")\n";
  return kExitOk;
}

}  // namespace berth
