#include "manifests/yaml_parse.h"

#include <exception>
#include <sstream>

#include <yaml-cpp/eventhandler.h>

namespace berth::manifests {
namespace {

// Notes where each document starts and whether it holds anything.
class DocumentScan : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark& mark) override {
    start = mark;
    has_content = false;
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override { has_content = true; }
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {
    has_content = true;
  }
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    has_content = true;
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    has_content = true;
  }
  void OnMapEnd() override {}

  YAML::Mark start;
  bool has_content = false;
};

// Where a second, non-empty document starts, if there is one. yaml-cpp 0.7's LoadAll can loop
// forever on input such as ",]" (jbeder/yaml-cpp#1040), so this reads at most two documents.
std::optional<YAML::Mark> SecondDocument(const std::string& text) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  DocumentScan scan;
  if (!parser.HandleNextDocument(scan)) return std::nullopt;
  if (!parser.HandleNextDocument(scan) || !scan.has_content) return std::nullopt;
  return scan.start;
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

std::optional<YAML::Node> ParseDocument(YamlReader& r, const std::string& text) {
  try {
    YAML::Node root = YAML::Load(text);
    std::optional<YAML::Mark> second = SecondDocument(text);
    if (second) {
      SourceLoc loc{r.file(), second->line + 1, second->column + 1};
      r.Error(loc, "a second YAML document in one file", "put each document in its own file");
    }
    if (root.IsNull()) {
      if (std::optional<Stray> stray = StrayFlowIndicator(r.file(), text)) {
        r.Error(stray->loc, std::string("YAML syntax error: unexpected '") + stray->c + "'");
        return std::nullopt;
      }
    }
    return root;
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
