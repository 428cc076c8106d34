#include "manifests/yaml_flow.h"

#include <cstdio>
#include <string_view>
#include <utility>

namespace berth::manifests {
namespace {

constexpr std::string_view kStrTag = "tag:yaml.org,2002:str";

// Whether a plain scalar's text, written plain inside a flow collection, would read as
// something else: a flow indicator splits it, ": " or " #" starts a value or a comment, a
// leading indicator makes it an alias, anchor, tag, block scalar or quoted string, and edge
// spaces are dropped.
bool NeedsQuotes(std::string_view s) {
  if (s.empty() || s.front() == ' ' || s.back() == ' ' || s.back() == ':') return true;
  if (std::string_view("!&*|>'\"%@`#").find(s.front()) != std::string_view::npos) return true;
  if ((s.front() == '-' || s.front() == '?' || s.front() == ':') && (s.size() == 1 || s[1] == ' '))
    return true;
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) return true;
    if (c == ',' || c == '[' || c == ']' || c == '{' || c == '}') return true;
    if (c == ':' && i + 1 < s.size() && s[i + 1] == ' ') return true;
    if (c == '#' && i > 0 && s[i - 1] == ' ') return true;
  }
  return false;
}

void AppendQuoted(std::string_view s, std::string* out) {
  *out += '"';
  for (char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (ch == '"' || ch == '\\') {
      *out += '\\';
      *out += ch;
    } else if (ch == '\n') {
      *out += "\\n";
    } else if (ch == '\t') {
      *out += "\\t";
    } else if (ch == '\r') {
      *out += "\\r";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      *out += buf;
    } else {
      *out += ch;
    }
  }
  *out += '"';
}

class FlowWriter {
 public:
  bool Write(const YamlNode& node, int depth) {
    if (depth > kMaxFlowDepth || out_.size() > kMaxFlowBytes) return false;
    const std::string& tag = node.Tag();
    const bool quoted = node.IsScalar() && (tag == "!" || tag == kStrTag);
    if (!tag.empty() && tag != "?" && tag != "!" && !(node.IsScalar() && tag == kStrTag)) {
      out_ += "!<" + tag + "> ";
    }
    if (node.IsSequence()) {
      out_ += '[';
      size_t i = 0;
      for (const YamlNode item : node) {
        if (i++ > 0) out_ += ", ";
        if (!Write(item, depth + 1)) return false;
      }
      out_ += ']';
    } else if (node.IsMap()) {
      out_ += '{';
      for (size_t i = 0; i < node.size(); ++i) {
        if (i > 0) out_ += ", ";
        if (!Write(node.KeyAt(i), depth + 1)) return false;
        out_ += ": ";
        if (!Write(node.ValueAt(i), depth + 1)) return false;
      }
      out_ += '}';
    } else if (node.IsScalar()) {
      if (quoted || NeedsQuotes(node.Scalar()))
        AppendQuoted(node.Scalar(), &out_);
      else
        out_ += node.Scalar();
    } else {
      out_ += "null";
    }
    return out_.size() <= kMaxFlowBytes;
  }
  std::string& text() { return out_; }

 private:
  std::string out_;
};

}  // namespace

std::optional<std::string> FlowText(const YamlNode& node) {
  FlowWriter w;
  if (!w.Write(node, 0)) return std::nullopt;
  return std::move(w.text());
}

}  // namespace berth::manifests
