#include "manifests/yaml_parse.h"

#include <cstdint>
#include <exception>
#include <map>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

namespace berth::manifests {
namespace {

// What reading the tree costs once every alias is expanded, as the decoder does: each node
// counts kNodeCost, each scalar its length too. An alias costs what its anchor's node costs, so a
// YAML bomb (an alias of an alias of ..., or one large node aliased a thousand times) is seen
// from its events alone, without expanding anything.
constexpr uint64_t kNodeCost = 64;
// The most that aliases may add: 16 MiB of expanded text. A real manifest reuses an env block
// or an args list a few dozen times; that costs a few KiB.
constexpr uint64_t kMaxAliasCost = uint64_t{16} << 20;

uint64_t SaturatingAdd(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

// Notes where each document starts, whether it holds anything, and what its aliases expand to.
class DocumentScan : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark& mark) override {
    start = mark;
    has_content = false;
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t anchor) override {
    Leaf(anchor, kNodeCost, /*content=*/false);  // an empty document holds only a null
  }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    has_content = true;
    auto it = cost_of_anchor_.find(anchor);
    uint64_t cost = it == cost_of_anchor_.end() ? kNodeCost : it->second;
    alias_cost = SaturatingAdd(alias_cost, cost);
    if (alias_cost > kMaxAliasCost && !over_limit) {
      over_limit = true;
      over_limit_at = mark;
    }
    Add(cost);
  }
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t anchor,
                const std::string& value) override {
    Leaf(anchor, SaturatingAdd(kNodeCost, value.size()), /*content=*/true);
  }
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    Open(anchor);
  }
  void OnSequenceEnd() override { Close(); }
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    Open(anchor);
  }
  void OnMapEnd() override { Close(); }

  YAML::Mark start;
  bool has_content = false;
  uint64_t alias_cost = 0;  // what the aliases of the documents read so far expand to
  bool over_limit = false;
  YAML::Mark over_limit_at;  // the alias that passed kMaxAliasCost

 private:
  struct Open_ {
    YAML::anchor_t anchor;
    uint64_t cost;
  };
  void Add(uint64_t cost) {
    if (!open_.empty()) open_.back().cost = SaturatingAdd(open_.back().cost, cost);
  }
  void Leaf(YAML::anchor_t anchor, uint64_t cost, bool content) {
    has_content = has_content || content;
    if (anchor != YAML::NullAnchor) cost_of_anchor_[anchor] = cost;
    Add(cost);
  }
  void Open(YAML::anchor_t anchor) {
    has_content = true;
    open_.push_back({anchor, kNodeCost});
  }
  void Close() {
    if (open_.empty()) return;
    Open_ done = open_.back();
    open_.pop_back();
    if (done.anchor != YAML::NullAnchor) cost_of_anchor_[done.anchor] = done.cost;
    Add(done.cost);
  }

  std::vector<Open_> open_;
  std::map<YAML::anchor_t, uint64_t> cost_of_anchor_;
};

// Builds the tree from yaml-cpp's events, as YAML::Load's NodeBuilder does: an alias shares its
// anchor's node.
class TreeBuilder : public YAML::EventHandler {
 public:
  explicit TreeBuilder(YamlDocument* doc) : doc_(doc) {}

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    Add(doc_->New(YamlType::kNull, At(mark)), anchor);
  }
  void OnAlias(const YAML::Mark&, YAML::anchor_t anchor) override {
    auto it = anchors_.find(anchor);
    if (it != anchors_.end()) Add(it->second, YAML::NullAnchor);
  }
  void OnScalar(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                const std::string& value) override {
    YamlNodeData* n = doc_->New(YamlType::kScalar, At(mark), tag);
    n->scalar = value;
    Add(n, anchor);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    Open(YamlType::kSequence, mark, tag, anchor);
  }
  void OnSequenceEnd() override { Close(); }
  void OnMapStart(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    Open(YamlType::kMap, mark, tag, anchor);
  }
  void OnMapEnd() override { Close(); }

  const YamlNodeData* root() const { return root_; }

 private:
  static YamlMark At(const YAML::Mark& mark) {
    if (mark.is_null()) return YamlMark{};
    return YamlMark{mark.line, mark.column};
  }
  void Add(const YamlNodeData* n, YAML::anchor_t anchor) {
    if (anchor != YAML::NullAnchor) anchors_[anchor] = n;
    if (open_.empty()) {
      if (root_ == nullptr) root_ = n;
    } else {
      open_.back()->children.push_back(n);
    }
  }
  void Open(YamlType type, const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor) {
    YamlNodeData* n = doc_->New(type, At(mark), tag);
    Add(n, anchor);
    open_.push_back(n);
  }
  void Close() {
    if (!open_.empty()) open_.pop_back();
  }

  YamlDocument* doc_;
  std::vector<YamlNodeData*> open_;
  std::map<YAML::anchor_t, const YamlNodeData*> anchors_;
  const YamlNodeData* root_ = nullptr;
};

struct Scan {
  std::optional<YAML::Mark> second_document;  // where a second, non-empty document starts
  std::optional<YAML::Mark> alias_bomb;       // the alias whose expansion passed the limit
};

// Reads at most two documents' events: yaml-cpp 0.7's LoadAll can loop forever on input such
// as ",]" (jbeder/yaml-cpp#1040).
Scan ScanDocuments(const std::string& text) {
  Scan result;
  std::istringstream in(text);
  YAML::Parser parser(in);
  DocumentScan scan;
  if (!parser.HandleNextDocument(scan)) return result;
  if (scan.over_limit) {
    result.alias_bomb = scan.over_limit_at;
    return result;
  }
  if (parser.HandleNextDocument(scan) && scan.has_content) result.second_document = scan.start;
  return result;
}

// Whether `text` has a '*' anywhere, or a line that starts with "---" or "..." (conservative:
// a '*' in a string or a comment counts too).
bool MayHoldAliasOrSecondDocument(std::string_view text) {
  if (text.find('*') != std::string_view::npos) return true;
  for (std::string_view marker : {"---", "..."}) {
    if (text.starts_with(marker)) return true;
    std::string line_start = "\n";
    line_start += marker;
    if (text.find(line_start) != std::string_view::npos) return true;
  }
  return false;
}

struct Stray {
  SourceLoc loc;
  char c;
};

// yaml-cpp reads a stray ',', ']' or '}' before any content as an empty document rather than an
// error; say where it is instead of "missing 'berth: 1'".
std::optional<Stray> StrayFlowIndicator(const std::string& file, const std::string& text) {
  int line = 1, column = 1;
  bool in_comment = false;
  for (char c : text) {
    if (c == '\n') {
      ++line;
      column = 1;
      in_comment = false;
      continue;
    }
    if (!in_comment) {
      if (c == '#') {
        in_comment = true;
      } else if (c == ',' || c == ']' || c == '}') {
        return Stray{SourceLoc{file, line, column}, c};
      } else if (c != ' ' && c != '\t' && c != '\r') {
        return std::nullopt;
      }
    }
    ++column;
  }
  return std::nullopt;
}

}  // namespace

std::optional<YamlDocument> ParseDocument(YamlReader& r, const std::string& text) {
  try {
    // The events first: an alias bomb is refused before a tree is built. The scan reads the
    // whole text once more (yaml-cpp's scanner is most of a big manifest's load), so it runs
    // only when the text could hold what it looks for: an alias ('*') or a second document
    // (a line that starts with '---' or '...').
    Scan scan;
    if (MayHoldAliasOrSecondDocument(text)) scan = ScanDocuments(text);
    if (scan.alias_bomb) {
      r.Error(
          SourceLoc{r.file(), scan.alias_bomb->line + 1, scan.alias_bomb->column + 1},
          "YAML aliases expand to more than " + std::to_string(kMaxAliasCost >> 20) + " MiB here",
          "write the values out, or reuse fewer and smaller anchors");
      return std::nullopt;
    }
    YamlDocument doc;
    {
      std::istringstream in(text);
      YAML::Parser parser(in);
      TreeBuilder builder(&doc);
      if (parser.HandleNextDocument(builder)) doc.set_root(builder.root());
    }
    std::optional<YAML::Mark> second = scan.second_document;
    if (second) {
      SourceLoc loc{r.file(), second->line + 1, second->column + 1};
      r.Error(loc, "a second YAML document in one file", "put each document in its own file");
    }
    if (doc.root().IsNull()) {
      if (std::optional<Stray> stray = StrayFlowIndicator(r.file(), text)) {
        r.Error(stray->loc, std::string("YAML syntax error: unexpected '") + stray->c + "'");
        return std::nullopt;
      }
    }
    return doc;
  } catch (const YAML::Exception& e) {
    SourceLoc loc{r.file(), 0, 0};
    if (!e.mark.is_null()) loc = SourceLoc{r.file(), e.mark.line + 1, e.mark.column + 1};
    r.Error(loc, "YAML syntax error: " + e.msg);
  } catch (const std::exception& e) {
    r.Error(SourceLoc{r.file(), 0, 0}, std::string("cannot read YAML: ") + e.what());
  }
  return std::nullopt;
}

}  // namespace berth::manifests
