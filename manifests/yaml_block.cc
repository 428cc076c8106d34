#include "manifests/yaml_block.h"

#include <climits>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace berth::manifests {
namespace {

// Deeper nesting than this is left to yaml-cpp (and keeps this reader's recursion bounded).
constexpr int kMaxDepth = 64;
// yaml-cpp's limit on a simple key's length is 1024 characters; longer keys are its to judge.
constexpr size_t kMaxKeyLength = 1000;

struct Line {
  size_t begin = 0;      // offset of the line's first byte
  size_t end = 0;        // offset of its '\n', or of the end of the text
  int indent = 0;        // spaces before its first other character
  bool content = false;  // holds something besides spaces and a comment
};

bool IsNullText(std::string_view s) {
  return s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL";
}

std::string_view TrimRight(std::string_view s) {
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

// Whether a plain scalar cannot start at s[i] (yaml-cpp's PlainScalar / PlainScalarInFlow: an
// indicator, or '-', '?' or ':' followed by a space or the end of the line).
bool PlainCannotStart(std::string_view s, size_t i, bool flow) {
  char c = s[i];
  bool followed_by_blank = i + 1 == s.size() || s[i + 1] == ' ';
  switch (c) {
    case ' ':
    case ',':
    case '[':
    case ']':
    case '{':
    case '}':
    case '#':
    case '&':
    case '*':
    case '!':
    case '|':
    case '>':
    case '\'':
    case '"':
    case '%':
    case '@':
    case '`':
      return true;
    case '?':
      return flow || followed_by_blank;
    case '-':
    case ':':
      return followed_by_blank;
    default:
      return false;
  }
}

void SkipSpaces(std::string_view s, size_t* p) {
  while (*p < s.size() && s[*p] == ' ') ++*p;
}

// A quoted scalar that opens at s[p] and closes on the same line: its value, and the offset
// after the closing quote. Nullopt when it runs on past the line, or holds an escape other than
// \" \\ \/ \n \t.
std::optional<std::string> ReadQuoted(std::string_view s, size_t p, size_t* end) {
  std::string value;
  char quote = s[p];
  for (size_t i = p + 1; i < s.size();) {
    char c = s[i];
    if (quote == '\'' && c == '\'') {
      if (i + 1 < s.size() && s[i + 1] == '\'') {
        value += '\'';
        i += 2;
        continue;
      }
      *end = i + 1;
      return value;
    }
    if (quote == '"' && c == '"') {
      *end = i + 1;
      return value;
    }
    if (quote == '"' && c == '\\') {
      if (i + 1 == s.size()) return std::nullopt;
      switch (s[i + 1]) {
        case '"':
        case '\\':
        case '/':
          value += s[i + 1];
          break;
        case 'n':
          value += '\n';
          break;
        case 't':
          value += '\t';
          break;
        default:
          return std::nullopt;
      }
      i += 2;
      continue;
    }
    value += c;
    ++i;
  }
  return std::nullopt;
}

class BlockReader {
 public:
  BlockReader(std::string_view text, YamlDocument* doc) : text_(text), doc_(doc) {}

  bool Read() {
    if (text_.size() > INT_MAX || !SplitLines()) return false;
    SkipBlank();
    if (li_ == lines_.size()) {
      doc_->set_root(nullptr);  // no content: yaml-cpp reads no document at all
      return true;
    }
    const YamlNodeData* root = BlockNode(static_cast<size_t>(lines_[li_].indent));
    SkipBlank();
    if (failed_ || root == nullptr || li_ != lines_.size()) return false;
    doc_->set_root(root);
    return true;
  }

 private:
  struct Key {
    YamlNodeData* node;
    size_t after;  // offset after the ':'
  };

  // Splits the text into lines; false if it holds a byte this reader leaves to yaml-cpp: a tab,
  // a carriage return or another control character, or a line that starts a document or a
  // directive. Bytes outside ASCII may stand in comments; a scalar holding one is yaml-cpp's
  // (Plain, Quoted), as yaml-cpp counts a line's columns in characters, not bytes.
  bool SplitLines() {
    size_t begin = 0;
    while (begin < text_.size()) {
      size_t end = text_.find('\n', begin);
      if (end == std::string_view::npos) end = text_.size();
      Line line{begin, end, 0, false};
      std::string_view s = text_.substr(begin, end - begin);
      for (char ch : s) {
        auto c = static_cast<unsigned char>(ch);
        if (c < 0x20 || c == 0x7f) return false;
      }
      size_t indent = s.find_first_not_of(' ');
      if (indent != std::string_view::npos) {
        line.indent = static_cast<int>(indent);
        line.content = s[indent] != '#';
        if (s.starts_with("---") || s.starts_with("...") || s.starts_with('%')) return false;
      }
      lines_.push_back(line);
      begin = end + 1;
    }
    return true;
  }

  std::string_view Text(size_t li) const {
    return text_.substr(lines_[li].begin, lines_[li].end - lines_[li].begin);
  }
  static YamlMark MarkAt(size_t li, size_t col) {
    return YamlMark{static_cast<int>(li), static_cast<int>(col)};
  }
  void SkipBlank() {
    while (li_ < lines_.size() && !lines_[li_].content) ++li_;
  }
  std::nullptr_t Fail() {
    failed_ = true;
    return nullptr;
  }
  bool IsSeqEntry(size_t li, size_t col) const {
    std::string_view s = Text(li);
    return col < s.size() && s[col] == '-' && (col + 1 == s.size() || s[col + 1] == ' ');
  }

  YamlNodeData* Collection(YamlType type, YamlMark mark) { return doc_->New(type, mark, "?"); }
  // Marks the reading failed when `text` holds a byte outside ASCII.
  void AsciiOnly(std::string_view text) {
    for (char c : text) failed_ = failed_ || static_cast<unsigned char>(c) >= 0x80;
  }
  // A plain scalar; the texts yaml-cpp reads as null become a null node.
  YamlNodeData* Plain(std::string_view text, YamlMark mark) {
    AsciiOnly(text);
    if (IsNullText(text)) return doc_->New(YamlType::kNull, mark);
    YamlNodeData* n = doc_->New(YamlType::kScalar, mark, "?");
    n->scalar = text;
    return n;
  }
  YamlNodeData* Quoted(std::string value, YamlMark mark) {
    AsciiOnly(value);
    YamlNodeData* n = doc_->New(YamlType::kScalar, mark, "!");
    n->scalar = std::move(value);
    return n;
  }

  // The list or map whose first line is li_, starting at column `col`.
  YamlNodeData* BlockNode(size_t col) {
    if (IsSeqEntry(li_, col)) return Sequence(col);
    std::optional<Key> key = ScanKey(li_, col);
    if (failed_ || !key) return Fail();
    return Map(col);
  }

  // "key:" at (li, col): the key and where its value starts; nullopt if the line holds no key
  // there (failed_ set when it may hold one this reader does not read).
  std::optional<Key> ScanKey(size_t li, size_t col) {
    std::string_view s = Text(li);
    char c = s[col];
    if (c == '"' || c == '\'') {
      size_t end = 0;
      std::optional<std::string> value = ReadQuoted(s, col, &end);
      if (!value) {
        failed_ = true;
        return std::nullopt;
      }
      if (end < s.size() && s[end] == ':' && (end + 1 == s.size() || s[end + 1] == ' '))
        return Key{Quoted(std::move(*value), MarkAt(li, col)), end + 1};
      return std::nullopt;
    }
    if (PlainCannotStart(s, col, false)) return std::nullopt;
    for (size_t i = col; i < s.size(); ++i) {
      if (s[i] == '#' && s[i - 1] == ' ') return std::nullopt;
      if (s[i] == ':' && (i + 1 == s.size() || s[i + 1] == ' ')) {
        if (i - col > kMaxKeyLength) {
          failed_ = true;
          return std::nullopt;
        }
        return Key{Plain(TrimRight(s.substr(col, i - col)), MarkAt(li, col)), i + 1};
      }
    }
    return std::nullopt;
  }

  // A block map whose first key is at (li_, col) and whose other keys are at indent `col`.
  YamlNodeData* Map(size_t col) {
    if (++depth_ > kMaxDepth) return Fail();
    YamlNodeData* map = Collection(YamlType::kMap, MarkAt(li_, col));
    for (bool first = true;; first = false) {
      if (!first) {
        SkipBlank();
        if (li_ == lines_.size()) break;
        size_t indent = static_cast<size_t>(lines_[li_].indent);
        if (indent < col || IsSeqEntry(li_, col)) break;  // the enclosing node's to read
        if (indent > col) return Fail();
      }
      std::optional<Key> key = ScanKey(li_, col);
      if (failed_ || !key) return Fail();
      YamlNodeData* value = Value(li_, key->after, col);
      if (value == nullptr) return nullptr;
      map->children.push_back(key->node);
      map->children.push_back(value);
    }
    --depth_;
    return map;
  }

  // A block list whose entries' '-' are at column `col`, the first on line li_.
  YamlNodeData* Sequence(size_t col) {
    if (++depth_ > kMaxDepth) return Fail();
    YamlNodeData* seq = Collection(YamlType::kSequence, MarkAt(li_, col));
    for (bool first = true;; first = false) {
      if (!first) {
        SkipBlank();
        if (li_ == lines_.size()) break;
        size_t indent = static_cast<size_t>(lines_[li_].indent);
        if (indent < col || !IsSeqEntry(li_, col)) break;
        if (indent > col) return Fail();
      }
      std::string_view s = Text(li_);
      size_t p = col + 1;
      SkipSpaces(s, &p);
      // An entry on the lines below, an empty one, or a list in a list: yaml-cpp's.
      if (p == s.size() || s[p] == '#' || IsSeqEntry(li_, p)) return Fail();
      std::optional<Key> key = ScanKey(li_, p);
      if (failed_) return nullptr;
      YamlNodeData* item = key ? Map(p) : Scalar(col);
      if (item == nullptr) return nullptr;
      seq->children.push_back(item);
    }
    --depth_;
    return seq;
  }

  // The value of a list entry at li_ (its '-' at `col`) that starts on the entry's line.
  YamlNodeData* Scalar(size_t col) {
    std::string_view s = Text(li_);
    size_t p = col + 1;
    SkipSpaces(s, &p);
    return InlineThenEnd(li_, p, col);
  }

  // The value of the key on line li whose ':' ends at `after`, in a map at indent `col`.
  YamlNodeData* Value(size_t li, size_t after, size_t col) {
    std::string_view s = Text(li);
    size_t p = after;
    SkipSpaces(s, &p);
    if (p < s.size() && s[p] != '#') return InlineThenEnd(li, p, col);
    li_ = li + 1;
    SkipBlank();
    if (li_ < lines_.size()) {
      size_t indent = static_cast<size_t>(lines_[li_].indent);
      if (indent > col) return BlockNode(indent);
      if (indent == col && IsSeqEntry(li_, col)) return Sequence(col);
    }
    // Empty: null. yaml-cpp places it at the next token; nothing reads a null's position.
    return doc_->New(YamlType::kNull, YamlMark{});
  }

  // Inline at (li, p) in a node at indent `col`, then li_ on the next line, which must not be
  // deeper than `col`: a deeper line would continue a plain scalar (or be an error).
  YamlNodeData* InlineThenEnd(size_t li, size_t p, size_t col) {
    Cursor at{li, p, col};
    YamlNodeData* node = Inline(&at);
    if (node == nullptr) return nullptr;
    li_ = at.li + 1;
    SkipBlank();
    if (li_ < lines_.size() && static_cast<size_t>(lines_[li_].indent) > col) return Fail();
    return node;
  }

  // A position in a flow collection, which may go on over lines deeper than `col`.
  struct Cursor {
    size_t li;
    size_t p;
    size_t col;
  };

  // A value that starts at the cursor and ends with its line (a flow collection: with the line
  // it closes on): a flow list or map, a quoted scalar or a plain one, then at most a comment.
  YamlNodeData* Inline(Cursor* at) {
    std::string_view s = Text(at->li);
    size_t p = at->p;
    char c = s[p];
    if (c == '[' || c == '{') {
      YamlNodeData* node = Flow(at);
      if (node == nullptr) return nullptr;
      s = Text(at->li);
      size_t rest = at->p;
      SkipSpaces(s, &rest);
      if (rest < s.size() && (s[rest] != '#' || rest == at->p)) return Fail();
      return node;
    }
    if (c == '"' || c == '\'') {
      size_t end = 0;
      std::optional<std::string> value = ReadQuoted(s, p, &end);
      if (!value) return Fail();
      YamlNodeData* node = Quoted(std::move(*value), MarkAt(at->li, p));
      size_t rest = end;
      SkipSpaces(s, &rest);
      if (rest < s.size() && (s[rest] != '#' || rest == end)) return Fail();
      return node;
    }
    if (PlainCannotStart(s, p, false)) return Fail();
    size_t end = s.size();
    for (size_t i = p; i < s.size(); ++i) {
      if (s[i] == ':' && (i + 1 == s.size() || s[i + 1] == ' ')) return Fail();
      if (s[i] == '#' && s[i - 1] == ' ') {
        end = i;
        break;
      }
    }
    return Plain(TrimRight(s.substr(p, end - p)), MarkAt(at->li, p));
  }

  // Skips spaces, and past the end of the line (or a comment) onto the next line that holds
  // something; false at the end of the text or on a line not deeper than the cursor's `col`.
  bool SkipFlowSpace(Cursor* at) {
    while (true) {
      std::string_view s = Text(at->li);
      size_t before = at->p;
      SkipSpaces(s, &at->p);
      bool comment = at->p < s.size() && s[at->p] == '#' &&
                     (at->p > before || at->p == 0 || s[at->p - 1] == ' ');
      if (at->p < s.size() && !comment) return true;
      size_t next = at->li + 1;
      while (next < lines_.size() && !lines_[next].content) ++next;
      if (next == lines_.size() || static_cast<size_t>(lines_[next].indent) <= at->col)
        return false;
      at->li = next;
      at->p = 0;
    }
  }

  // A flow list or map that opens at the cursor; the cursor moves past its end.
  YamlNodeData* Flow(Cursor* at) {
    if (++depth_ > kMaxDepth) return Fail();
    std::string_view s = Text(at->li);
    bool is_map = s[at->p] == '{';
    char close = is_map ? '}' : ']';
    YamlNodeData* node =
        Collection(is_map ? YamlType::kMap : YamlType::kSequence, MarkAt(at->li, at->p));
    ++at->p;
    if (!SkipFlowSpace(at)) return Fail();
    if (Text(at->li)[at->p] == close) {
      ++at->p;
      --depth_;
      return node;
    }
    while (true) {
      if (is_map) {
        char c = Text(at->li)[at->p];
        if (c == '[' || c == '{') return Fail();
        YamlNodeData* key = FlowItem(at);
        if (key == nullptr) return nullptr;
        s = Text(at->li);
        if (at->p + 1 >= s.size() || s[at->p] != ':' || s[at->p + 1] != ' ') return Fail();
        at->p += 2;
        if (!SkipFlowSpace(at)) return Fail();
        YamlNodeData* value = FlowItem(at);
        if (value == nullptr) return nullptr;
        node->children.push_back(key);
        node->children.push_back(value);
      } else {
        YamlNodeData* item = FlowItem(at);
        if (item == nullptr) return nullptr;
        node->children.push_back(item);
      }
      if (!SkipFlowSpace(at)) return Fail();
      s = Text(at->li);
      if (s[at->p] == ',') {
        ++at->p;
        if (!SkipFlowSpace(at)) return Fail();
        if (Text(at->li)[at->p] == close) return Fail();  // a trailing comma
        continue;
      }
      if (s[at->p] != close) return Fail();
      ++at->p;
      --depth_;
      return node;
    }
  }

  // One item (or key, or value) of a flow collection at the cursor, which moves past it. A
  // plain scalar ends on its line, before a ',', ']', '}' or ':'.
  YamlNodeData* FlowItem(Cursor* at) {
    std::string_view s = Text(at->li);
    size_t& p = at->p;
    char c = s[p];
    if (c == '[' || c == '{') return Flow(at);
    if (c == '"' || c == '\'') {
      size_t end = 0;
      std::optional<std::string> value = ReadQuoted(s, p, &end);
      if (!value) return Fail();
      YamlNodeData* node = Quoted(std::move(*value), MarkAt(at->li, p));
      p = end;
      return node;
    }
    if (PlainCannotStart(s, p, true)) return Fail();
    size_t start = p;
    for (; p < s.size(); ++p) {
      char ch = s[p];
      if (ch == ',' || ch == ']' || ch == '}') break;
      if (ch == '[' || ch == '{' || ch == '?') return Fail();
      if (ch == '#' && s[p - 1] == ' ') return Fail();
      if (ch == ':') {
        char next = p + 1 < s.size() ? s[p + 1] : ' ';
        if (next == ' ' || next == ',' || next == ']' || next == '}') break;
      }
    }
    if (p == s.size()) return Fail();  // a plain scalar that may go on over the line
    return Plain(TrimRight(s.substr(start, p - start)), MarkAt(at->li, start));
  }

  std::string_view text_;
  YamlDocument* doc_;
  std::vector<Line> lines_;
  size_t li_ = 0;
  int depth_ = 0;
  bool failed_ = false;
};

}  // namespace

bool ReadBlockYaml(std::string_view text, YamlDocument* doc) {
  return BlockReader(text, doc).Read();
}

}  // namespace berth::manifests
