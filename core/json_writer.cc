#include "core/json_writer.h"

#include <charconv>

#include "core/json_text.h"
#include "core/untrusted_text.h"

namespace berth {

JsonWriter JsonWriter::InArray(std::string* out, int depth, bool first) {
  JsonWriter w(out);
  w.base_depth_ = static_cast<size_t>(depth);
  w.levels_.push_back({true, first});
  return w;
}

void JsonWriter::Newline(size_t depth) {
  out_->push_back('\n');
  out_->append(2 * depth, ' ');
}

void JsonWriter::BeforeValue() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (levels_.empty() || !levels_.back().array) return;  // the top value
  Level& in = levels_.back();
  if (!in.first) out_->push_back(',');
  in.first = false;
  Newline(base_depth_ + levels_.size());
}

JsonWriter& JsonWriter::BeginObject() {
  BeforeValue();
  out_->push_back('{');
  levels_.push_back({false, true});
  return *this;
}

JsonWriter& JsonWriter::BeginArray() {
  BeforeValue();
  out_->push_back('[');
  levels_.push_back({true, true});
  return *this;
}

JsonWriter& JsonWriter::EndObject() {
  bool empty = levels_.back().first;
  levels_.pop_back();
  if (!empty) Newline(base_depth_ + levels_.size());
  out_->push_back('}');
  return *this;
}

JsonWriter& JsonWriter::EndArray() {
  bool empty = levels_.back().first;
  levels_.pop_back();
  if (!empty) Newline(base_depth_ + levels_.size());
  out_->push_back(']');
  return *this;
}

JsonWriter& JsonWriter::Key(std::string_view key) {
  Level& in = levels_.back();
  if (!in.first) out_->push_back(',');
  in.first = false;
  Newline(base_depth_ + levels_.size());
  String(key);
  out_->append(": ");
  after_key_ = true;
  return *this;
}

// As nlohmann's serializer escapes without ensure_ascii: the two-character escapes, \u00xx for
// the other controls, everything else as it is.
void JsonWriter::String(std::string_view s) {
  if (!IsUtf8(s)) {
    String(VisibleBytes(s));
    return;
  }
  static const char kHex[] = "0123456789abcdef";
  out_->push_back('"');
  size_t plain = 0;  // start of the run of bytes copied as they are
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out_->append(s.data() + plain, i - plain);
    plain = i + 1;
    switch (c) {
      case '"':
        out_->append("\\\"");
        break;
      case '\\':
        out_->append("\\\\");
        break;
      case '\b':
        out_->append("\\b");
        break;
      case '\f':
        out_->append("\\f");
        break;
      case '\n':
        out_->append("\\n");
        break;
      case '\r':
        out_->append("\\r");
        break;
      case '\t':
        out_->append("\\t");
        break;
      default:
        out_->append("\\u00");
        out_->push_back(kHex[c >> 4]);
        out_->push_back(kHex[c & 0xf]);
    }
  }
  out_->append(s.data() + plain, s.size() - plain);
  out_->push_back('"');
}

JsonWriter& JsonWriter::Value(std::string_view s) {
  BeforeValue();
  String(s);
  return *this;
}

JsonWriter& JsonWriter::Raw(std::string_view text) {
  BeforeValue();
  out_->append(text);
  return *this;
}

JsonWriter& JsonWriter::Value(bool b) { return Raw(b ? "true" : "false"); }

JsonWriter& JsonWriter::Value(std::nullptr_t) { return Raw("null"); }

JsonWriter& JsonWriter::Signed(int64_t n) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, n);
  return Raw(std::string_view(buf, static_cast<size_t>(r.ptr - buf)));
}

JsonWriter& JsonWriter::Unsigned(uint64_t n) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, n);
  return Raw(std::string_view(buf, static_cast<size_t>(r.ptr - buf)));
}

// nlohmann's own number format (shortest round trip, "1.0" for a whole number, null for NaN).
JsonWriter& JsonWriter::Value(double d) { return Raw(DumpJson(nlohmann::ordered_json(d))); }

JsonWriter& JsonWriter::Value(const nlohmann::ordered_json& j) {
  BeforeValue();
  // Dumped at the top level, then indented to sit here: its newlines (never inside a string,
  // where JSON escapes them) are followed by the indentation of this level.
  std::string text = DumpJson(j, 2);
  std::string indent(2 * (base_depth_ + levels_.size()), ' ');
  size_t start = 0;
  for (size_t nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1) {
    out_->append(text, start, nl + 1 - start);
    out_->append(indent);
  }
  out_->append(text, start, std::string::npos);
  return *this;
}

}  // namespace berth
