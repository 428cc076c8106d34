#include "engine/core/json_text.h"

#include "engine/core/untrusted_text.h"

namespace berth {
namespace {

using json = nlohmann::json;

bool AllUtf8(const json& j) {
  if (j.is_string()) return IsUtf8(j.get_ref<const std::string&>());
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it)
      if (!IsUtf8(it.key()) || !AllUtf8(it.value())) return false;
    return true;
  }
  if (j.is_array()) {
    for (const auto& value : j)
      if (!AllUtf8(value)) return false;
  }
  return true;
}

json Visible(const json& j) {
  if (j.is_string()) return VisibleBytes(j.get_ref<const std::string&>());
  if (j.is_object()) {
    json out = json::object();
    for (auto it = j.begin(); it != j.end(); ++it)
      out[VisibleBytes(it.key())] = Visible(it.value());
    return out;
  }
  if (j.is_array()) {
    json out = json::array();
    for (const auto& value : j) out.push_back(Visible(value));
    return out;
  }
  return j;
}

}  // namespace

std::string DumpJson(const json& j, int indent) {
  // The copy is made only for a document that needs it; `replace` is never reached then, it
  // only makes sure dump() cannot throw.
  if (AllUtf8(j)) return j.dump(indent, ' ', false, json::error_handler_t::replace);
  return Visible(j).dump(indent, ' ', false, json::error_handler_t::replace);
}

}  // namespace berth
