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
  DocumentBuilder(std::string_view text, JsonItemSink* sink)
      : text_(text), sink_(sink), reader_(sink ? sink->ItemReader() : nullptr) {}

  nlohmann::json root;

  void Null() override { reading_ ? reader_->Null() : void(Set(nullptr)); }
  void Boolean(bool v) override { reading_ ? reader_->Boolean(v) : void(Set(v)); }
  void Signed(int64_t v) override { reading_ ? reader_->Signed(v) : void(Set(v)); }
  void Unsigned(uint64_t v) override { reading_ ? reader_->Unsigned(v) : void(Set(v)); }
  void Float(double v) override { reading_ ? reader_->Float(v) : void(Set(v)); }
  void String(std::string_view s) override {
    reading_ ? reader_->String(s) : void(Set(std::string(s)));
  }
  void Key(std::string_view k) override { reading_ ? reader_->Key(k) : void(key_ = k); }
  void StartObject() override {
    if (reading_) {
      ++reading_;
      return reader_->StartObject();
    }
    Role role = RoleOf(/*object=*/true);
    if (role == Role::kItem && reader_) {
      // The sink's reader reads the item; the array holds null in its place.
      Set(nullptr);
      item_index_ = open_.back()->size() - 1;
      item_start_ = Offset();
      reading_ = 1;
      return reader_->StartObject();
    }
    Open(Set(nlohmann::json::object()), role);
  }
  void EndObject() override {
    if (reading_) {
      reader_->EndObject();
      if (--reading_ == 0) {
        // Its text from its '{' (only spaces lie between that and where it began).
        size_t from = text_.rfind('{', item_start_ - 1);
        reader_->Done(item_index_, text_.substr(from, Offset() - from));
      }
      return;
    }
    if (sink_ && roles_.back() == Role::kItem) {
      nlohmann::json& item = *open_.back();
      sink_->Take(open_[open_.size() - 2]->size() - 1, item);
      item = nullptr;
    }
    Close();
  }
  void StartArray() override {
    if (reading_) {
      ++reading_;
      return reader_->StartArray();
    }
    Role role = RoleOf(/*object=*/false);
    Open(Set(nlohmann::json::array()), role);
  }
  void EndArray() override {
    if (reading_) {
      --reading_;
      return reader_->EndArray();
    }
    Close();
  }

 private:
  // Where an open container is, for the sink: the root object, root[object_key],
  // root[object_key][array_key], an object item of that array, or anywhere else.
  enum class Role { kOther, kRoot, kSection, kItems, kItem };

  // The role of the container about to open (before it is added).
  Role RoleOf(bool object) {
    if (!sink_) return Role::kOther;
    Role parent = roles_.empty() ? Role::kOther : roles_.back();
    if (open_.empty() && object) return Role::kRoot;
    if (parent == Role::kRoot && object && key_ == sink_->object_key()) {
      sink_->Reset();  // a repeated key: this one replaces what came before
      return Role::kSection;
    }
    if (parent == Role::kSection && !object && key_ == sink_->array_key()) {
      sink_->Reset();
      return Role::kItems;
    }
    if (parent == Role::kItems && object) return Role::kItem;
    return Role::kOther;
  }
  void Open(nlohmann::json* container, Role role) {
    open_.push_back(container);
    roles_.push_back(role);
  }
  void Close() {
    open_.pop_back();
    roles_.pop_back();
  }

  nlohmann::json* Set(nlohmann::json v) {
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

  std::string_view text_;
  JsonItemSink* sink_;
  JsonItemReader* reader_;  // the sink's, reading items itself; or nullptr
  // The open arrays and objects, innermost last: an array's items are added only once its last
  // open item is closed, so these pointers stay valid.
  std::vector<nlohmann::json*> open_;
  std::vector<Role> roles_;  // of each open container
  std::string key_;
  // While reader_ reads an item: how deep in it the scanner is (0: not reading), the item's
  // index and where its text began.
  size_t reading_ = 0;
  size_t item_index_ = 0;
  size_t item_start_ = 0;
};

}  // namespace

std::optional<nlohmann::json> ReadJsonFast(std::string_view text) {
  return ReadJsonFast(text, nullptr);
}

std::optional<nlohmann::json> ReadJsonFast(std::string_view text, JsonItemSink* sink) {
  DocumentBuilder builder(text, sink);
  if (!ScanJson(text, builder)) return std::nullopt;
  return std::move(builder.root);
}

}  // namespace berth
