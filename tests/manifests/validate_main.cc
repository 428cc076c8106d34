// manifest_validate_probe PATH...: loads each manifest file or folder, prints its diagnostics,
// exits 0 if every one is valid and 1 otherwise. schema_check.py uses it to hold the validator
// and schema.json to the same verdicts.
#include <cstdio>
#include <string>

#include "manifests/loader.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MANIFEST_FILE_OR_FOLDER...\n", argv[0]);
    return 2;
  }
  bool ok = true;
  for (int i = 1; i < argc; ++i) {
    berth::LoadResult result = berth::LoadManifests(argv[i]);
    for (const berth::Diagnostic& d : result.diagnostics) {
      std::printf("%s\n", d.ToString().c_str());
    }
    ok = ok && result.ok();
  }
  return ok ? 0 : 1;
}
