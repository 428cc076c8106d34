#include "core/json_text.h"

#include "core/untrusted_text.h"

namespace berth {
namespace {

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
  // dump() checks the UTF-8 of every string as it writes and throws on a stray byte; only then
  // is the document copied with its stray bytes made visible (`replace` is never reached).
  try {
    return j.dump(indent, ' ', false, Json::error_handler_t::strict);
  } catch (const typename Json::type_error&) {
    return Visible(j).dump(indent, ' ', false, Json::error_handler_t::replace);
  }
}

}  // namespace

std::string DumpJson(const nlohmann::json& j, int indent) { return Dump(j, indent); }

std::string DumpJson(const nlohmann::ordered_json& j, int indent) { return Dump(j, indent); }

}  // namespace berth
