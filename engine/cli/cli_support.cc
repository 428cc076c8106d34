#include "engine/cli/cli_support.h"

#include "manifests/loader.h"

namespace berth {

bool LoadManifestOrExplain(const std::string& path, Desired* desired, std::ostream& err) {
  LoadResult r = LoadManifests(path);
  if (!r.ok()) {
    for (const auto& d : r.diagnostics) err << d.ToString() << "\n";
    err << r.diagnostics.size() << " problem" << (r.diagnostics.size() == 1 ? "" : "s") << " in "
        << path << "; nothing was planned or changed\n";
    return false;
  }
  *desired = std::move(r.desired);
  return true;
}

bool ParseSource(const std::string& source, std::string* repo, std::string* revision,
                 std::ostream& err) {
  const std::string prefix = "hf://";
  std::string rest = source.rfind(prefix, 0) == 0 ? source.substr(prefix.size()) : "";
  size_t at = rest.find('@');
  *repo = rest.substr(0, at);
  *revision = at == std::string::npos ? "main" : rest.substr(at + 1);
  size_t slash = repo->find('/');
  if (repo->empty() || slash == std::string::npos || slash == 0 || slash + 1 == repo->size() ||
      repo->find('/', slash + 1) != std::string::npos || revision->empty()) {
    err << "'" << source
        << "' is not a model source: write hf://org/name or hf://org/name@revision\n";
    return false;
  }
  return true;
}

}  // namespace berth
