// Every option of every engine, rendered and checked against the engine's flag catalogue: the
// manifest tests/engine/every_option/berth.yaml sets every key the schema lists for each engine
// section (this test fails when the schema gains one it does not set), and each flag berth
// renders for it is one the engine's parser takes at the catalogued release, not deprecated
// there, with a value among its choices.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "manifests/loader.h"
#include "planners/servers/adapter.h"
#include "planners/servers/catalogue.h"

namespace berth {
namespace {

const std::string kDir = std::string(BERTH_SOURCE_DIR) + "/tests/engine/every_option/";

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The text of service `name`'s block in the manifest: from "  name:" to the next line indented
// by two spaces only (the next service), or the end.
std::string Block(const std::string& yaml, const std::string& name) {
  size_t at = yaml.find("\n  " + name + ":\n");
  if (at == std::string::npos) return "";
  size_t end = yaml.size();
  for (size_t nl = yaml.find('\n', at + 1); nl != std::string::npos && nl + 3 < yaml.size();
       nl = yaml.find('\n', nl + 1))
    if (yaml.compare(nl + 1, 2, "  ") == 0 && yaml[nl + 3] != ' ') {
      end = nl;
      break;
    }
  return yaml.substr(at, end - at);
}

bool Sets(const std::string& text, const std::string& key) {
  return std::regex_search(text, std::regex("(^|[\\s{,])" + key + ":"));
}

struct EngineCase {
  const char* section;                // the schema's (and manifest's) engine section
  std::vector<std::string> services;  // the manifest's services of that engine
  CatalogueEngine catalogue;
};

const std::vector<EngineCase>& Cases() {
  static const std::vector<EngineCase> cases = {
      {"vllm", {"v", "vn"}, CatalogueEngine::kVllm},
      {"sglang", {"s"}, CatalogueEngine::kSglang},
      {"llama_server", {"l"}, CatalogueEngine::kLlamaServer},
      {"trtllm", {"t"}, CatalogueEngine::kTrtllm},
  };
  return cases;
}

TEST(EveryOption, TheManifestSetsEveryKeyTheSchemaListsForEachEngine) {
  nlohmann::json schema = nlohmann::json::parse(
      Read(std::string(BERTH_SOURCE_DIR) + "/manifests/schema.json"), nullptr, false);
  ASSERT_TRUE(schema.is_object());
  const nlohmann::json& service = schema["properties"]["services"]["additionalProperties"];
  const std::string yaml = Read(kDir + "berth.yaml");
  int keys = 0;
  for (const EngineCase& c : Cases()) {
    const nlohmann::json& section = service["properties"][c.section];
    ASSERT_TRUE(section.contains("properties")) << c.section;
    std::string text;
    for (const std::string& s : c.services) text += Block(yaml, s);
    ASSERT_FALSE(text.empty()) << c.section;
    for (const auto& [key, sub] : section["properties"].items()) {
      EXPECT_TRUE(Sets(text, key)) << c.section << "." << key << " is not set in " << kDir;
      ++keys;
      if (sub.contains("properties"))
        for (const auto& [inner, unused] : sub["properties"].items()) {
          EXPECT_TRUE(Sets(text, inner))
              << c.section << "." << key << "." << inner << " is not set in " << kDir;
          ++keys;
        }
    }
  }
  EXPECT_GE(keys, 40);
}

TEST(EveryOption, EveryFlagBerthRendersIsOneTheEngineTakes) {
  LoadResult r = LoadManifests(kDir + "berth.yaml");
  ASSERT_TRUE(r.ok());
  int flags = 0;
  for (const EngineCase& c : Cases()) {
    const EngineCatalogue& cat = Catalogue(c.catalogue);
    for (const std::string& name : c.services) {
      SCOPED_TRACE(name);
      const ServiceSpec& s = r.desired.services.at(name);
      RenderContext ctx;
      ctx.store = "/models";
      ctx.snapshot_path = "/models/models--o--m/snapshots/abc";
      ctx.draft_snapshot_path = s.draft_model.empty() ? "" : "/models/models--o--d/snapshots/def";
      ctx.executable = ResolveExecutable(s, {});
      std::vector<std::string> argv = ServiceArgv(s, ctx);
      // `python3 -m sglang.launch_server`: the interpreter's own flag, not SGLang's.
      size_t first = argv.size() > 2 && argv[1] == "-m" ? 3 : 1;
      for (size_t i = first; i < argv.size(); ++i) {
        const std::string& a = argv[i];
        if (!a.starts_with("-")) continue;  // a subcommand or the positional model
        const CatalogueFlag* f = cat.Find(a);
        ASSERT_NE(f, nullptr) << cat.engine << " at " << cat.commit << " has no " << a;
        EXPECT_FALSE(f->deprecated) << cat.engine << " marks " << a << " deprecated";
        ++flags;
        if (!f->takes_value) continue;
        ASSERT_LT(i + 1, argv.size()) << a << " needs a value";
        if (!f->choices.empty()) {
          EXPECT_THAT(f->choices, ::testing::Contains(argv[i + 1])) << a;
        }
        ++i;
      }
    }
  }
  EXPECT_GE(flags, 50);
}

}  // namespace
}  // namespace berth
