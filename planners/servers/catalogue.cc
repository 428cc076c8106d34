#include "planners/servers/catalogue.h"

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>

#include "planners/servers/catalogue_embedded.h"

namespace berth {
namespace {

using nlohmann::json;

std::vector<std::string> Strings(const json& j, std::string_view key) {
  std::vector<std::string> out;
  auto it = j.find(key);
  if (it == j.end() || !it->is_array()) return out;
  for (const auto& v : *it)
    if (v.is_string()) out.push_back(v.get<std::string>());
  return out;
}

std::string String(const json& j, std::string_view key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

bool Bool(const json& j, std::string_view key) {
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() && it->get<bool>();
}

bool UnderscoreIsDash(std::string_view engine) {
  return engine == "vllm" || engine == "llama_server";
}

EngineCatalogue Parse(CatalogueEngine e, const std::string& text) {
  EngineCatalogue cat;
  cat.engine = std::string(CatalogueEngineName(e));
  json root = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!root.is_object() || String(root, "engine") != cat.engine) return cat;
  cat.release = String(root, "release");
  cat.commit = String(root, "commit");
  auto flags = root.find("flags");
  if (flags != root.end() && flags->is_object()) {
    for (auto it = flags->begin(); it != flags->end(); ++it) {
      if (!it.value().is_object()) continue;
      CatalogueFlag f;
      f.name = it.key();
      f.aliases = Strings(it.value(), "aliases");
      f.takes_value = Bool(it.value(), "takes_value");
      f.choices = Strings(it.value(), "choices");
      f.deprecated = Bool(it.value(), "deprecated");
      f.fit_params = Bool(it.value(), "fit_params");
      auto values = it.value().find("values");
      f.values = values != it.value().end() && values->is_number_integer() ? values->get<int>()
                                                                           : f.takes_value;
      cat.flags.push_back(std::move(f));
    }
  }
  std::sort(cat.flags.begin(), cat.flags.end(),
            [](const CatalogueFlag& a, const CatalogueFlag& b) { return a.name < b.name; });
  for (size_t i = 0; i < cat.flags.size(); ++i) {
    cat.index.emplace(cat.flags[i].name, i);
    for (const auto& a : cat.flags[i].aliases) cat.index.emplace(a, i);
  }
  auto tables = root.find("tables");
  if (tables != root.end() && tables->is_object()) {
    for (auto it = tables->begin(); it != tables->end(); ++it)
      if (it.value().is_array()) cat.tables[it.key()] = Strings(*tables, it.key());
  }
  return cat;
}

std::string EmbeddedJson(CatalogueEngine e) {
  switch (e) {
    case CatalogueEngine::kVllm:
      return catalogue_embedded::VllmJson();
    case CatalogueEngine::kSglang:
      return catalogue_embedded::SglangJson();
    case CatalogueEngine::kLlamaServer:
      return catalogue_embedded::LlamaServerJson();
    case CatalogueEngine::kTrtllm:
      return catalogue_embedded::TrtllmJson();
  }
  return {};
}

}  // namespace

std::string_view CatalogueEngineName(CatalogueEngine e) {
  switch (e) {
    case CatalogueEngine::kVllm:
      return "vllm";
    case CatalogueEngine::kSglang:
      return "sglang";
    case CatalogueEngine::kLlamaServer:
      return "llama_server";
    case CatalogueEngine::kTrtllm:
      return "trtllm";
  }
  return "";
}

const CatalogueFlag* EngineCatalogue::Find(std::string_view flag) const {
  if (auto eq = flag.find('='); eq != std::string_view::npos && flag.starts_with("-"))
    flag = flag.substr(0, eq);
  if (auto it = index.find(flag); it != index.end()) return &flags[it->second];
  if (UnderscoreIsDash(engine) && flag.starts_with("--")) {
    std::string dashed(flag);
    std::replace(dashed.begin() + 2, dashed.end(), '_', '-');
    if (auto it = index.find(dashed); it != index.end()) return &flags[it->second];
  }
  return nullptr;
}

const std::vector<std::string>& EngineCatalogue::Table(std::string_view name) const {
  static const std::vector<std::string> kEmpty;
  auto it = tables.find(name);
  return it == tables.end() ? kEmpty : it->second;
}

bool EngineCatalogue::InTable(std::string_view table, std::string_view value) const {
  const auto& t = Table(table);
  return std::find(t.begin(), t.end(), value) != t.end();
}

const EngineCatalogue& Catalogue(CatalogueEngine e) {
  static const std::array<EngineCatalogue, 4> kAll = [] {
    std::array<EngineCatalogue, 4> all;
    for (auto engine : {CatalogueEngine::kVllm, CatalogueEngine::kSglang,
                        CatalogueEngine::kLlamaServer, CatalogueEngine::kTrtllm})
      all[static_cast<size_t>(engine)] = Parse(engine, EmbeddedJson(engine));
    return all;
  }();
  return kAll[static_cast<size_t>(e)];
}

}  // namespace berth
