#include "core/json_text.h"

#include "core/untrusted_text.h"

namespace berth {
namespace {

template <typename Json>
bool AllUtf8(const Json& j) {
  if (j.is_string()) return IsUtf8(j.template get_ref<const std::string&>());
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

template <typename Json>
Json Visible(const Json& j) {
  if (j.is_string()) return VisibleBytes(j.template get_ref<const std::string&>());
  if (j.is_object()) {
    Json out = Json::object();
    for (auto it = j.begin(); it != j.end(); ++it)
      out[VisibleBytes(it.key())] = Visible(it.value());
    return out;
  }
  if (j.is_array()) {
    Json out = Json::array();
    for (const auto& value : j) out.push_back(Visible(value));
    return out;
  }
  return j;
}

template <typename Json>
std::string Dump(const Json& j, int indent) {
  // The copy is made only for a document that needs it; `replace` is never reached then, it
  // only makes sure dump() cannot throw.
  if (AllUtf8(j)) return j.dump(indent, ' ', false, Json::error_handler_t::replace);
  return Visible(j).dump(indent, ' ', false, Json::error_handler_t::replace);
}

}  // namespace

std::string DumpJson(const nlohmann::json& j, int indent) { return Dump(j, indent); }

std::string DumpJson(const nlohmann::ordered_json& j, int indent) { return Dump(j, indent); }

}  // namespace berth
