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
  explicit DocumentBuilder(JsonItemSink* sink) : sink_(sink) {}

  nlohmann::json root;

  void Null() override { Add(nullptr); }
  void Boolean(bool v) override { Add(v); }
  void Signed(int64_t v) override { Add(v); }
  void Unsigned(uint64_t v) override { Add(v); }
  void Float(double v) override { Add(v); }
  void String(std::string_view s) override { Add(std::string(s)); }
  void Key(std::string_view k) override { key_ = k; }
  void StartObject() override { Open(Add(nlohmann::json::object()), /*object=*/true); }
  void EndObject() override {
    if (sink_ && roles_.back() == Role::kItem) {
      nlohmann::json& item = *open_.back();
      sink_->Take(open_[open_.size() - 2]->size() - 1, item);
      item = nullptr;
    }
    Close();
  }
  void StartArray() override { Open(Add(nlohmann::json::array()), /*object=*/false); }
  void EndArray() override { Close(); }

 private:
  // Where an open container is, for the sink: the root object, root[object_key],
  // root[object_key][array_key], an object item of that array, or anywhere else.
  enum class Role { kOther, kRoot, kSection, kItems, kItem };

  void Open(nlohmann::json* container, bool object) {
    Role role = Role::kOther;
    if (sink_) {
      Role parent = roles_.empty() ? Role::kOther : roles_.back();
      if (open_.empty() && object) {
        role = Role::kRoot;
      } else if (parent == Role::kRoot && object && key_ == sink_->object_key()) {
        role = Role::kSection;
        sink_->Reset();  // a repeated key: this one replaces what came before
      } else if (parent == Role::kSection && !object && key_ == sink_->array_key()) {
        role = Role::kItems;
        sink_->Reset();
      } else if (parent == Role::kItems && object) {
        role = Role::kItem;
      }
    }
    open_.push_back(container);
    roles_.push_back(role);
  }
  void Close() {
    open_.pop_back();
    roles_.pop_back();
  }

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

  JsonItemSink* sink_;
  // The open arrays and objects, innermost last: an array's items are added only once its last
  // open item is closed, so these pointers stay valid.
  std::vector<nlohmann::json*> open_;
  std::vector<Role> roles_;  // of each open container
  std::string key_;
};

}  // namespace

std::optional<nlohmann::json> ReadJsonFast(std::string_view text) {
  return ReadJsonFast(text, nullptr);
}

std::optional<nlohmann::json> ReadJsonFast(std::string_view text, JsonItemSink* sink) {
  DocumentBuilder builder(sink);
  if (!ScanJson(text, builder)) return std::nullopt;
  return std::move(builder.root);
}

}  // namespace berth
