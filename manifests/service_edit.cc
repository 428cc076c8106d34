#include "manifests/service_edit.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <utility>

#include "core/read_file.h"
#include "manifests/loader.h"
#include "manifests/yaml_parse.h"
#include "manifests/yaml_reader.h"

namespace berth {
namespace {

using manifests::YamlDocument;
using manifests::YamlNode;
using Path = std::vector<std::string>;

constexpr size_t kNone = std::string_view::npos;

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }
bool IsFlowIndicator(char c) { return std::string_view(",[]{}").find(c) != kNone; }

// The first `n` keys of `path`, joined with dots.
std::string Join(const Path& path, size_t n = kNone) {
  std::string out;
  for (size_t i = 0; i < n && i < path.size(); ++i) out += (i > 0 ? "." : "") + path[i];
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

// `text` parsed as the one YAML document of `file`; the parser's first problem otherwise.
Result<YamlDocument> Parse(const std::string& file, const std::string& text) {
  std::vector<Diagnostic> problems;
  manifests::YamlReader reader(file, &problems);
  std::optional<YamlDocument> doc = manifests::ParseDocument(reader, text);
  if (!problems.empty()) return Status::InvalidArgument(problems.front().ToString());
  if (!doc) return Status::InvalidArgument(file + ": cannot parse");
  return std::move(*doc);
}

// The entry of `map` named `key` (none: size()); `*twice` set when a second one follows it.
size_t FindKey(YamlNode map, std::string_view key, std::optional<size_t>* twice = nullptr) {
  size_t found = map.size();
  for (size_t i = 0; i < map.size(); ++i) {
    if (!map.KeyAt(i).IsScalar() || map.KeyAt(i).Scalar() != key) continue;
    if (found == map.size()) {
      found = i;
    } else if (twice != nullptr) {
      *twice = i;
      break;
    }
  }
  return found;
}

// The index of `service`'s entry in `doc`'s `services:` map, which the file writes once.
Result<size_t> ServiceEntry(const YamlDocument& doc, const std::string& file,
                            const std::string& service) {
  auto written_twice = [&](YamlNode key, const std::string& what) {
    return Status::InvalidArgument(file + ":" + std::to_string(key.Mark().line + 1) + ": " + what +
                                   " is written twice");
  };
  std::optional<size_t> twice;
  FindKey(doc.root(), "services", &twice);
  if (twice) return written_twice(doc.root().KeyAt(*twice), "'services'");
  const YamlNode services = doc.root()["services"];
  const size_t at = FindKey(services, service, &twice);
  if (at == services.size())
    return Status::NotFound("service '" + service + "' is not declared in " + file);
  if (twice) return written_twice(services.KeyAt(*twice), "service '" + service + "'");
  return at;
}

// One past the closing quote of the scalar quoted at `at`; kNone when unclosed.
size_t QuotedEnd(std::string_view t, size_t at) {
  const char quote = t[at];
  for (size_t i = at + 1; i < t.size(); ++i) {
    if (quote == '"' && t[i] == '\\') {
      ++i;
    } else if (t[i] == quote) {
      if (quote == '\'' && i + 1 < t.size() && t[i + 1] == '\'') {
        ++i;  // '' is a quote inside single quotes
      } else {
        return i + 1;
      }
    }
  }
  return kNone;
}

// One past the bracket that closes the flow collection opened at `at`, quotes and comments
// inside skipped; kNone when unclosed. A quote opens a scalar only where a scalar can start.
size_t CollectionEnd(std::string_view t, size_t at) {
  int depth = 0;
  char before = '[';  // the last character that is not a space
  for (size_t i = at; i < t.size(); ++i) {
    const char c = t[i];
    if ((c == '"' || c == '\'') && std::string_view("[{,:?").find(before) != kNone) {
      i = QuotedEnd(t, i);
      if (i == kNone) return kNone;
      --i;
    } else if (c == '#' && IsSpace(t[i - 1])) {
      while (i + 1 < t.size() && t[i + 1] != '\n') ++i;
      continue;
    } else if (c == '[' || c == '{') {
      ++depth;
    } else if ((c == ']' || c == '}') && --depth == 0) {
      return i + 1;
    }
    if (!IsSpace(c)) before = c;
  }
  return kNone;
}

// One past the last character of the node written at `at`: a flow collection's closing
// bracket, a quoted scalar's closing quote, a plain scalar's last character before the line's
// end, " #", ": " or (in a flow collection) a flow indicator. kNone for an unclosed one.
size_t NodeEnd(std::string_view t, size_t at, bool in_flow) {
  if (t[at] == '[' || t[at] == '{') return CollectionEnd(t, at);
  if (t[at] == '"' || t[at] == '\'') return QuotedEnd(t, at);
  size_t end = at;
  for (size_t i = at; i < t.size() && t[i] != '\n' && t[i] != '\r'; ++i) {
    const char c = t[i];
    const bool colon_ends = c == ':' && (i + 1 == t.size() || IsSpace(t[i + 1]) ||
                                         (in_flow && IsFlowIndicator(t[i + 1])));
    if ((c == '#' && i > at && IsSpace(t[i - 1])) || colon_ends || (in_flow && IsFlowIndicator(c)))
      break;
    if (!IsSpace(c)) end = i + 1;
  }
  return end;
}

// `value` placed under the path's remaining keys, as flow: {a: {b: value}} for {a, b}.
std::string NestedFlow(const Path& keys, size_t from, const std::string& value) {
  if (from == keys.size()) return value;
  return "{" + keys[from] + ": " + NestedFlow(keys, from + 1, value) + "}";
}

// The lines of the text being edited.
class Lines {
 public:
  explicit Lines(std::string_view text) : text_(text) {
    starts_.push_back(0);
    for (size_t i = 0; i < text.size(); ++i) {
      if (text[i] == '\n') starts_.push_back(i + 1);
    }
  }
  size_t Offset(YamlNode n) const { return starts_[n.Mark().line] + n.Mark().column; }
  int LineOf(size_t offset) const {
    return static_cast<int>(std::upper_bound(starts_.begin(), starts_.end(), offset) -
                            starts_.begin()) -
           1;
  }
  // Where line `l`'s text ends: at its "\n" or "\r\n", or the text's end.
  size_t EndOf(int l) const {
    size_t end = l + 1 < static_cast<int>(starts_.size()) ? starts_[l + 1] - 1 : text_.size();
    if (end > starts_[l] && end < text_.size() && text_[end - 1] == '\r') --end;
    return end;
  }
  std::string_view Line(int l) const { return text_.substr(starts_[l], EndOf(l) - starts_[l]); }
  int count() const { return static_cast<int>(starts_.size()); }

  // The last line of the block map entry whose key is at `key`'s line and column: the last
  // line of content (not blank, not only a comment) before the next one indented no deeper
  // than the key, except the "- " items of a list at the key's own indentation.
  int EntryEnd(YamlNode key) const {
    const size_t column = static_cast<size_t>(key.Mark().column);
    int last = key.Mark().line;
    for (int l = last + 1; l < count(); ++l) {
      std::string_view s = Line(l);
      const size_t indent = s.find_first_not_of(' ');
      if (indent == kNone || s[indent] == '#' || IsSpace(s[indent])) continue;
      const bool list_item = s[indent] == '-' && (indent + 1 == s.size() || IsSpace(s[indent + 1]));
      if (indent < column || (indent == column && !list_item)) break;
      last = l;
    }
    return last;
  }

 private:
  std::string_view text_;
  std::vector<size_t> starts_;  // each line's first byte
};

// A change of the text: [begin, end) becomes `text`.
struct Edit {
  size_t begin = 0, end = 0;
  std::string text;
};

// Where one setting goes in one version of the text.
class Placement {
 public:
  Placement(std::string_view text, const std::string& file, const std::string& service,
            const TuneSetting& setting, const Path& path, const std::string& value)
      : text_(text),
        lines_(text),
        file_(file),
        service_(service),
        setting_(setting),
        path_(path),
        value_(value),
        newline_(text.find("\r\n") != kNone ? "\r\n" : "\n") {}

  // Follows the path from the service's entry (the `entry`th of the map `services`): the edit
  // that replaces the value at its end, or inserts the rest of the path where it stops.
  Result<Edit> Place(YamlNode services, size_t entry) const {
    YamlNode key = services.KeyAt(entry), node = services.ValueAt(entry);
    bool flow = text_[lines_.Offset(services)] == '{';  // inside a flow collection
    for (size_t i = 0; i < path_.size(); ++i) {
      if (node.IsNull() && !flow) return Replace(key, node, flow, NestedFlow(path_, i, value_));
      if (Status s = CheckOwnValue(key, node); !s.ok()) return s;
      if (!node.IsMap()) {
        return Error(node, "'" + (i == 0 ? service_ : Join(path_, i)) + "' is " +
                               manifests::YamlReader::Describe(node) +
                               "; a setting's path goes through maps only");
      }
      flow = flow || text_[lines_.Offset(node)] == '{';
      std::optional<size_t> twice;
      const size_t at = FindKey(node, path_[i], &twice);
      if (twice) {
        return Error(node.KeyAt(*twice), "'" + Join(path_, i + 1) +
                                             "' is written twice, first at " + file_ + ":" +
                                             std::to_string(node.KeyAt(at).Mark().line + 1));
      }
      if (at == node.size()) return Insert(key, node, flow, i);
      key = node.KeyAt(at);
      node = node.ValueAt(at);
    }
    if (Status s = CheckOwnValue(key, node); !s.ok()) return s;
    return Replace(key, node, flow, value_);
  }

 private:
  Status Error(YamlNode at, const std::string& why) const {
    std::string message = file_ + ":" + std::to_string(at.Mark().line + 1) + ": cannot set '";
    message += setting_.path + "' of service '" + service_ + "': " + why;
    return Status::InvalidArgument(std::move(message));
  }

  // A value written for `key` itself: not an alias of a node written earlier (its mark is
  // before the key's), nor anchored or tagged (an edit would drop what others refer to).
  Status CheckOwnValue(YamlNode key, YamlNode value) const {
    if (value.IsNull()) return Status::Ok();
    if (lines_.Offset(value) < lines_.Offset(key))
      return Error(key, "'" + key.Scalar() + "' is an alias (*name); write the value out");
    const char first = text_[lines_.Offset(value)];
    if (first == '&' || first == '!')
      return Error(value, "'" + key.Scalar() + "' carries an anchor or a tag");
    return Status::Ok();
  }

  // The value of `key` (in a flow map when `flow`) becomes `with`.
  Result<Edit> Replace(YamlNode key, YamlNode value, bool flow, const std::string& with) const {
    const int key_line = key.Mark().line;
    size_t begin = value.IsNull() ? kNone : lines_.Offset(value);
    if (begin != kNone && (text_[begin] == '|' || text_[begin] == '>')) begin = kNone;
    const size_t end = begin == kNone ? kNone : NodeEnd(text_, begin, flow);
    if (flow) {
      if (end == kNone)
        return Error(key, "cannot find where the value of '" + key.Scalar() + "' ends");
      return Edit{begin, end, with};
    }
    const int last = lines_.EntryEnd(key);
    // A value that starts on its key's line and ends on its entry's last line, in place.
    if (end != kNone && value.Mark().line == key_line && lines_.LineOf(end - 1) >= last)
      return Edit{begin, end, with};
    // Otherwise (a block collection or scalar, a plain scalar over lines, an empty value) its
    // lines become " with" after the colon, a comment on the key's line kept.
    const size_t key_end = NodeEnd(text_, lines_.Offset(key), false);
    const size_t colon = text_.find_first_not_of(" \t", key_end);
    if (key_end == kNone || colon == kNone || text_[colon] != ':')
      return Error(key, "cannot find the ':' after '" + key.Scalar() + "'");
    std::string_view rest = text_.substr(colon + 1, lines_.EndOf(key_line) - colon - 1);
    std::string_view comment;
    if (value.IsNull() || value.Mark().line != key_line) {
      if (!Trim(rest).empty() && Trim(rest).front() != '#')
        return Error(key, "cannot read the line of '" + key.Scalar() + "'");
      comment = rest.substr(0, rest.find_last_not_of(" \t") + 1);
    }
    return Edit{colon + 1, lines_.EndOf(last), " " + with + std::string(comment)};
  }

  // The keys path_[from...] (the first missing from `map`, the value of `owner`) added to
  // `map` with the value.
  Result<Edit> Insert(YamlNode owner, YamlNode map, bool flow, size_t from) const {
    if (flow) {
      const size_t end = CollectionEnd(text_, lines_.Offset(map));
      if (end == kNone) return Error(map, "cannot find the '}' of '" + owner.Scalar() + "'");
      const size_t after = text_.find_last_not_of(" \t\r\n", end - 2) + 1;  // before the '}'
      const char last = text_[after - 1];
      std::string entry = last == '{' ? "" : last == ',' ? " " : ", ";
      entry += path_[from] + ": " + NestedFlow(path_, from + 1, value_);
      return Edit{after, after, entry};
    }
    const int column = map.Mark().column;
    const int step = std::max(column - owner.Mark().column, 2);
    const size_t at = lines_.EndOf(lines_.EntryEnd(map.KeyAt(map.size() - 1)));
    std::string lines;
    for (size_t i = from; i < path_.size(); ++i) {
      lines += newline_ + std::string(column + (i - from) * step, ' ') + path_[i] + ":";
      if (i + 1 == path_.size()) lines += " " + value_;
    }
    return Edit{at, at, lines};
  }

  std::string_view text_;
  Lines lines_;
  const std::string& file_;
  const std::string& service_;
  const TuneSetting& setting_;
  const Path& path_;
  const std::string& value_;
  const char* newline_;
};

// A setting as placed and checked: its path split at the dots, its value trimmed and parsed.
struct Wanted {
  Path path;
  std::string value;
  YamlDocument parsed;
};

// `setting`'s path split at its dots: keys of letters, digits, '_' and '-'.
Result<Path> SplitPath(const TuneSetting& setting) {
  Path path(1);
  for (char c : setting.path) {
    if (c == '.' && !path.back().empty()) {
      path.emplace_back();
    } else if (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-') {
      path.back() += c;
    } else {
      path.back().clear();
      break;
    }
  }
  if (path.back().empty()) {
    return Status::InvalidArgument("setting '" + setting.path +
                                   "': not a dotted path of keys (vllm.tensor_parallel_size)");
  }
  return path;
}

// `setting`'s value, trimmed: one line of YAML flow that ends where it is placed even inside a
// flow map; its parsed document in `*parsed`.
Result<std::string> FlowValue(const TuneSetting& setting, YamlDocument* parsed) {
  const std::string value(Trim(setting.value));
  const std::string name = "setting '" + setting.path + "'";
  auto refuse = [&](const std::string& why) {
    return Status::InvalidArgument(name + ": '" + setting.value + "' is not one YAML flow value (" +
                                   why + ")");
  };
  if (value.empty()) return refuse("it is empty");
  if (value.find_first_of("\r\n") != kNone) return refuse("it has more than one line");
  if (std::string_view("&*|>#").find(value.front()) != kNone)
    return refuse("an anchor, alias, block scalar or comment");
  Result<YamlDocument> doc = Parse("value", value);
  if (!doc.ok()) return refuse(doc.status().message());
  const YamlNode root = doc->root();
  if ((root.IsMap() || root.IsSequence()) && value.front() != '{' && value.front() != '[')
    return refuse("a block collection; write it in flow style, [a, b] or {k: v}");
  if (NodeEnd(value, 0, true) != value.size())
    return refuse("it does not end as one value; quote it");
  *parsed = std::move(doc).value();
  return value;
}

// Whether `a` and `b` hold the same value: types, tags and scalar texts, recursively.
bool SameValue(YamlNode a, YamlNode b) {
  auto kind = [](YamlNode n) {
    return !n ? 0 : n.IsNull() ? 1 : n.IsScalar() ? 2 : n.IsSequence() ? 3 : 4;
  };
  if (kind(a) != kind(b) || a.Tag() != b.Tag() || a.Scalar() != b.Scalar() || a.size() != b.size())
    return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a.IsMap() ? !SameValue(a.KeyAt(i), b.KeyAt(i)) || !SameValue(a.ValueAt(i), b.ValueAt(i))
                  : !SameValue(a[i], b[i]))
      return false;
  }
  return true;
}

// Whether the document before (`a`) and after (`b`) an edit are the same outside the `edited`
// paths, from the node at `at` down; `*diff` says where not. The maps on the way to an edited
// path are compared entry by entry (one made by the edit as if it were empty before); the
// edited keys must be written once.
bool SameOutside(YamlNode a, YamlNode b, const Path& at, const std::vector<Path>& edited,
                 std::string* diff) {
  auto above = [&](const Path& p, bool or_at) {
    return std::any_of(edited.begin(), edited.end(), [&](const Path& e) {
      return (or_at || e.size() > p.size()) && std::equal(p.begin(), p.end(), e.begin());
    });
  };
  const bool made = (!a || a.IsNull()) && b.IsMap();
  if (!above(at, false) || !(a.IsMap() || made) || !b.IsMap()) {
    if (SameValue(a, b)) return true;
    // Appended piecewise: g++ 12 warns falsely (-Wrestrict) of "x" + std::string&& at -O3.
    *diff = "'";
    *diff += Join(at);
    *diff += "' differs";
    return false;
  }
  // The entries that no edit touches, in order, and the keys of those that lead to or are one.
  auto untouched = [&](YamlNode map, std::vector<std::string>* touched) {
    std::vector<std::pair<YamlNode, YamlNode>> out;
    for (size_t i = 0; i < map.size(); ++i) {
      Path p = at;
      p.push_back(map.KeyAt(i).Scalar());
      if (map.KeyAt(i).IsScalar() && above(p, true))
        touched->push_back(p.back());
      else
        out.emplace_back(map.KeyAt(i), map.ValueAt(i));
    }
    return out;
  };
  auto child = [&](const std::string& key) {
    Path p = at;
    p.push_back(key);
    return p;
  };
  std::vector<std::string> touched_a, touched_b;
  const auto ea = untouched(a, &touched_a), eb = untouched(b, &touched_b);
  for (size_t i = 0; i < std::max(ea.size(), eb.size()); ++i) {
    if (i < ea.size() && i < eb.size() && SameValue(ea[i].first, eb[i].first) &&
        SameValue(ea[i].second, eb[i].second))
      continue;
    *diff = "'";
    *diff += Join(child((i < ea.size() ? ea[i] : eb[i]).first.Scalar()));
    *diff += "' differs";
    return false;
  }
  for (const std::string& key : touched_b) {
    std::optional<size_t> twice;
    const size_t i = FindKey(b, key, &twice);
    if (twice) {
      *diff = "'";
      *diff += Join(child(key));
      *diff += "' is written twice";
      return false;
    }
    const bool is_edited = std::find(edited.begin(), edited.end(), child(key)) != edited.end();
    if (!is_edited && !SameOutside(a[key], b.ValueAt(i), child(key), edited, diff)) return false;
  }
  for (const std::string& key : touched_a) {
    if (!b[key]) {
      *diff = "'";
      *diff += Join(child(key));
      *diff += "' is gone";
      return false;
    }
  }
  return true;
}

// `before` and `after`, the documents around the edit of `service`, differ in exactly the
// `wanted` values.
Status Verify(const YamlDocument& before, const YamlDocument& after, const std::string& service,
              const std::vector<Wanted>& wanted) {
  std::vector<Path> edited;
  for (const Wanted& w : wanted) {
    edited.push_back({"services", service});
    edited.back().insert(edited.back().end(), w.path.begin(), w.path.end());
    YamlNode at = after.root();
    for (const std::string& key : edited.back()) at = at[key];
    if (!SameValue(at, w.parsed.root()))
      return Status::Internal("the edited file does not hold '" + Join(w.path) + "' as given");
  }
  std::string diff;
  if (!SameOutside(before.root(), after.root(), {}, edited, &diff))
    return Status::Internal("the edit changed more than the settings: " + diff);
  return Status::Ok();
}

}  // namespace

Result<std::string> DeclaringFile(const std::string& manifest_path, const std::string& service) {
  std::vector<Diagnostic> problems;
  const std::vector<std::string> files = ListManifestFiles(manifest_path, &problems);
  if (!problems.empty()) return Status::InvalidArgument(problems.front().ToString());
  std::vector<std::string> declaring;
  for (const std::string& file : files) {
    Result<std::string> text =
        ReadRegularFile(file, {.max_bytes = kMaxManifestFileBytes, .follow_links = true});
    if (!text.ok()) return Status::InvalidArgument(text.status().message());
    Result<YamlDocument> doc = Parse(file, *text);
    if (!doc.ok()) return doc.status();
    const YamlNode services = doc->root()["services"];
    if (FindKey(services, service) < services.size()) declaring.push_back(file);
  }
  if (declaring.empty())
    return Status::NotFound("service '" + service + "' is not declared in " + manifest_path);
  if (declaring.size() > 1) {
    return Status::InvalidArgument("service '" + service + "' is declared in both " + declaring[0] +
                                   " and " + declaring[1]);
  }
  return declaring.front();
}

Result<std::string> SetServiceSettings(std::string_view text, const std::string& file_name,
                                       const std::string& service,
                                       const std::vector<TuneSetting>& settings) {
  std::vector<Wanted> wanted;
  for (const TuneSetting& setting : settings) {
    Result<Path> path = SplitPath(setting);
    if (!path.ok()) return path.status();
    for (size_t i = 0; i < wanted.size(); ++i) {
      const size_t n = std::min(wanted[i].path.size(), path->size());
      if (std::equal(path->begin(), path->begin() + n, wanted[i].path.begin()))
        return Status::InvalidArgument("settings '" + settings[i].path + "' and '" + setting.path +
                                       "' overlap");
    }
    Wanted w{std::move(path).value(), "", {}};
    Result<std::string> value = FlowValue(setting, &w.parsed);
    if (!value.ok()) return value.status();
    w.value = std::move(value).value();
    wanted.push_back(std::move(w));
  }

  std::string out(text);
  Result<YamlDocument> before = Parse(file_name, out);
  if (!before.ok()) return before.status();
  BERTH_RETURN_IF_ERROR(ServiceEntry(*before, file_name, service).status());
  // One setting at a time, each placed in the text the ones before it made.
  for (size_t i = 0; i < settings.size(); ++i) {
    Result<YamlDocument> doc = Parse(file_name, out);
    Result<size_t> at = doc.ok() ? ServiceEntry(*doc, file_name, service) : doc.status();
    if (!at.ok())
      return Status::Internal("an earlier setting's edit broke the file: " + at.status().message());
    Placement placement(out, file_name, service, settings[i], wanted[i].path, wanted[i].value);
    Result<Edit> edit = placement.Place(doc->root()["services"], *at);
    if (!edit.ok()) return edit.status();
    out.replace(edit->begin, edit->end - edit->begin, edit->text);
  }
  Result<YamlDocument> after = Parse(file_name, out);
  if (!after.ok())
    return Status::Internal("the edited file does not parse: " + after.status().message());
  BERTH_RETURN_IF_ERROR(Verify(*before, *after, service, wanted));
  return out;
}

}  // namespace berth
