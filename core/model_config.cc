#include "core/model_config.h"

#include <nlohmann/json.hpp>

#include "core/untrusted_text.h"

namespace berth {

ModelConfig ParseModelConfig(std::string_view text) {
  ModelConfig c;
  nlohmann::json j = nlohmann::json::parse(text.begin(), text.end(), nullptr,
                                           /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    c.problem = "is not JSON";
    return c;
  }
  if (!j.is_object()) {
    c.problem = std::string("is JSON but not an object (") + j.type_name() + ")";
    return c;
  }
  // A name vLLM and transformers look up in their registries: anything else is not kept (and
  // then decides nothing).
  if (auto t = j.find("model_type"); t != j.end() && t->is_string()) {
    const std::string& type = t->get_ref<const std::string&>();
    bool name = !type.empty() && type.size() <= kMaxModelTypeBytes;
    for (char ch : type)
      name = name && ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                      (ch >= '0' && ch <= '9') || ch == '_' || ch == '-' || ch == '.');
    if (name) c.model_type = type;
  }
  auto it = j.find("architectures");
  if (it == j.end() || it->is_null()) {
    c.problem = "names no architectures (no \"architectures\" key)";
    return c;
  }
  if (!it->is_array()) {
    c.problem = std::string("has \"architectures\" of the wrong type (") + it->type_name() +
                ", expected a list of names)";
    return c;
  }
  for (const auto& a : *it) {
    if (!a.is_string() || a.get_ref<const std::string&>().empty()) {
      c.architectures.clear();
      c.problem = "has an \"architectures\" entry that is not a name";
      return c;
    }
    // A name, not a novel: bounded so a hostile file cannot fill the plan.
    const std::string& name = a.get_ref<const std::string&>();
    c.architectures.push_back(name.size() > 200 ? std::string(Utf8Prefix(name, 200)) + "..."
                                                : name);
    if (c.architectures.size() >= 16) break;
  }
  if (c.architectures.empty()) c.problem = "names no architectures (\"architectures\" is empty)";
  return c;
}

}  // namespace berth
