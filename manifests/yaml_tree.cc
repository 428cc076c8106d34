#include "manifests/yaml_tree.h"

#include <string>

namespace berth::manifests {
namespace {

const std::string& Empty() {
  static const std::string* const empty = new std::string();
  return *empty;
}

const char* TypeName(const YamlNode& n) {
  if (!n.IsDefined()) return "undefined";
  if (n.IsNull()) return "null";
  if (n.IsScalar()) return "scalar";
  if (n.IsSequence()) return "list";
  return "map";
}

}  // namespace

const std::string& YamlNode::Scalar() const {
  return data_ != nullptr && data_->type == YamlType::kScalar ? data_->scalar : Empty();
}

const std::string& YamlNode::Tag() const {
  return data_ != nullptr && data_->tag != nullptr ? *data_->tag : Empty();
}

const std::string* YamlDocument::Intern(std::string_view tag) {
  static const std::string* const plain = new std::string("?");
  static const std::string* const quoted = new std::string("!");
  if (tag.empty()) return nullptr;
  if (tag == *plain) return plain;
  if (tag == *quoted) return quoted;
  return &*tags_.emplace(tag).first;
}

size_t YamlNode::size() const {
  if (IsSequence()) return data_->children.size();
  if (IsMap()) return data_->children.size() / 2;
  return 0;
}

YamlNode YamlNode::operator[](std::string_view key) const {
  if (!IsMap()) return YamlNode();
  for (size_t i = 0; i + 1 < data_->children.size(); i += 2) {
    const YamlNodeData* k = data_->children[i];
    if (k->type == YamlType::kScalar && k->scalar == key) return YamlNode(data_->children[i + 1]);
  }
  return YamlNode();
}

YamlNode::Iterator YamlNode::begin() const {
  if (!IsSequence()) return Iterator(nullptr);
  return Iterator(data_->children.data());
}

YamlNode::Iterator YamlNode::end() const {
  if (!IsSequence()) return Iterator(nullptr);
  return Iterator(data_->children.data() + data_->children.size());
}

YamlNode YamlDocument::root() const {
  if (root_ != nullptr) return YamlNode(root_);
  static const YamlNodeData* const null_root = new YamlNodeData{};
  return YamlNode(null_root);
}

bool SameTree(YamlNode a, YamlNode b, std::string* where) {
  auto at = [](const YamlNode& n) {
    return std::to_string(n.Mark().line + 1) + ":" + std::to_string(n.Mark().column + 1);
  };
  auto differ = [&](const std::string& what) {
    *where = what + " at " + at(a) + " / " + at(b);
    return false;
  };
  if (std::string(TypeName(a)) != TypeName(b))
    return differ(std::string(TypeName(a)) + " vs " + TypeName(b));
  if (!a.IsDefined()) return true;
  if (!a.IsNull() && (a.Mark().line != b.Mark().line || a.Mark().column != b.Mark().column))
    return differ("positions");
  if (a.Tag() != b.Tag()) return differ("tags '" + a.Tag() + "' vs '" + b.Tag() + "'");
  if (a.Scalar() != b.Scalar()) return differ("texts '" + a.Scalar() + "' vs '" + b.Scalar() + "'");
  if (a.size() != b.size()) return differ("sizes");
  if (a.IsMap()) {
    for (size_t i = 0; i < a.size(); ++i) {
      if (!SameTree(a.KeyAt(i), b.KeyAt(i), where) || !SameTree(a.ValueAt(i), b.ValueAt(i), where))
        return false;
    }
  } else if (a.IsSequence()) {
    for (auto ia = a.begin(), ib = b.begin(); ia != a.end(); ++ia, ++ib) {
      if (!SameTree(*ia, *ib, where)) return false;
    }
  }
  return true;
}

}  // namespace berth::manifests
