#include "core/json_read.h"

#include <string>
#include <utility>
#include <vector>

#include "core/json_scan.h"

namespace berth {
namespace {

// Builds nlohmann's document from ScanJson's calls: each value goes into the open array, or
// under the last key into the open object (a repeated key: the last wins, as in nlohmann).
class DocumentBuilder : public JsonHandler {
 public:
  nlohmann::json root;

  void Null() override { Add(nullptr); }
  void Boolean(bool v) override { Add(v); }
  void Signed(int64_t v) override { Add(v); }
  void Unsigned(uint64_t v) override { Add(v); }
  void Float(double v) override { Add(v); }
  void String(std::string_view s) override { Add(std::string(s)); }
  void Key(std::string_view k) override { key_ = k; }
  void StartObject() override { open_.push_back(Add(nlohmann::json::object())); }
  void EndObject() override { open_.pop_back(); }
  void StartArray() override { open_.push_back(Add(nlohmann::json::array())); }
  void EndArray() override { open_.pop_back(); }

 private:
  nlohmann::json* Add(nlohmann::json v) {
    if (open_.empty()) {
      root = std::move(v);
      return &root;
    }
    nlohmann::json& into = *open_.back();
    if (into.is_array()) {
      into.get_ref<nlohmann::json::array_t&>().push_back(std::move(v));
      return &into.back();
    }
    nlohmann::json& slot = into.get_ref<nlohmann::json::object_t&>()[key_];
    slot = std::move(v);
    return &slot;
  }

  // The open arrays and objects, innermost last: an array's items are added only once its last
  // open item is closed, so these pointers stay valid.
  std::vector<nlohmann::json*> open_;
  std::string key_;
};

}  // namespace

std::optional<nlohmann::json> ReadJsonFast(std::string_view text) {
  DocumentBuilder builder;
  if (!ScanJson(text, builder)) return std::nullopt;
  return std::move(builder.root);
}

}  // namespace berth
