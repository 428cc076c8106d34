// A parsed YAML document as the decoders read it: maps (entries in source order, repeats kept),
// lists, scalars with their tag, and each node's position, built from yaml-cpp's events
// (yaml_parse.cc). Nodes live in their document; an alias shares its anchor's node.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace berth::manifests {

/// Where a node starts, 0-based as yaml-cpp counts (line, byte in line); -1 when unknown.
struct YamlMark {
  int line = -1;
  int column = -1;
  bool is_null() const { return line < 0; }
};

enum class YamlType : uint8_t { kUndefined, kNull, kScalar, kSequence, kMap };

struct YamlNodeData {
  YamlType type = YamlType::kNull;
  YamlMark mark;
  // "?" for a plain scalar or a collection, "!" for a quoted scalar, another for an explicit
  // tag (kept by the document); null for none.
  const std::string* tag = nullptr;
  std::string scalar;  // a scalar's text
  // A list's items; a map's keys and values, interleaved (key 0, value 0, key 1, ...).
  std::vector<const YamlNodeData*> children;
};

/// A handle to a node of a YamlDocument (cheap to copy; valid while the document lives). A
/// default handle is undefined: what a lookup of a missing key returns.
class YamlNode {
 public:
  YamlNode() = default;
  explicit YamlNode(const YamlNodeData* data) : data_(data) {}

  bool IsDefined() const { return data_ != nullptr; }
  bool IsNull() const { return data_ != nullptr && data_->type == YamlType::kNull; }
  bool IsScalar() const { return data_ != nullptr && data_->type == YamlType::kScalar; }
  bool IsSequence() const { return data_ != nullptr && data_->type == YamlType::kSequence; }
  bool IsMap() const { return data_ != nullptr && data_->type == YamlType::kMap; }
  explicit operator bool() const { return IsDefined(); }

  /// A scalar's text; "" for anything else.
  const std::string& Scalar() const;
  /// The node's tag; "" for an undefined node.
  const std::string& Tag() const;
  YamlMark Mark() const { return data_ != nullptr ? data_->mark : YamlMark{}; }

  /// A list's items, or a map's entries; 0 for anything else.
  size_t size() const;
  /// A map's i-th key and value, in source order.
  YamlNode KeyAt(size_t i) const { return YamlNode(data_->children[2 * i]); }
  YamlNode ValueAt(size_t i) const { return YamlNode(data_->children[2 * i + 1]); }
  /// The value of a map's first entry whose key is the scalar `key`; undefined if none.
  YamlNode operator[](std::string_view key) const;
  /// A list's i-th item; undefined past its end.
  YamlNode operator[](size_t i) const {
    return IsSequence() && i < data_->children.size() ? YamlNode(data_->children[i]) : YamlNode();
  }

  /// A list's items (nothing for a map or a scalar).
  class Iterator {
   public:
    explicit Iterator(const YamlNodeData* const* at) : at_(at) {}
    YamlNode operator*() const { return YamlNode(*at_); }
    Iterator& operator++() {
      ++at_;
      return *this;
    }
    bool operator!=(const Iterator& o) const { return at_ != o.at_; }
    bool operator==(const Iterator& o) const { return at_ == o.at_; }

   private:
    const YamlNodeData* const* at_;
  };
  Iterator begin() const;
  Iterator end() const;

 private:
  const YamlNodeData* data_ = nullptr;
};

/// The nodes of one parsed document and its root.
class YamlDocument {
 public:
  /// A new node owned by this document, with tag `tag` ("" for none).
  YamlNodeData* New(YamlType type, YamlMark mark, std::string_view tag = "") {
    if (used_ == kBlock) {
      blocks_.push_back(std::make_unique<YamlNodeData[]>(kBlock));
      used_ = 0;
    }
    YamlNodeData* n = &blocks_.back()[used_++];
    n->type = type;
    n->mark = mark;
    n->tag = Intern(tag);
    return n;
  }
  void set_root(const YamlNodeData* root) { root_ = root; }
  /// The root; a null node without a position for a document with no content.
  YamlNode root() const;

 private:
  static constexpr size_t kBlock = 512;
  const std::string* Intern(std::string_view tag);

  // Nodes stay where they were made (blocks, not one vector), also when the document moves.
  std::vector<std::unique_ptr<YamlNodeData[]>> blocks_;
  size_t used_ = kBlock;
  std::set<std::string, std::less<>> tags_;  // explicit tags, each once
  const YamlNodeData* root_ = nullptr;
};

/// Whether two trees hold the same types, texts, tags and positions (a null's position is not
/// compared: yaml-cpp places an empty value at the token after it). For tests of the readers.
bool SameTree(YamlNode a, YamlNode b, std::string* where);

}  // namespace berth::manifests
