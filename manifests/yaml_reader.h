// Typed, position-aware reads from a parsed YAML tree. Every read that fails adds a Diagnostic at
// the offending node and returns nullopt, so callers report every problem and carry on.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/unit_text.h"
#include "manifests/loader.h"
#include "manifests/yaml_tree.h"

namespace berth::manifests {

/// One key: value entry of a YAML map.
struct Field {
  std::string key;      // the key's text, e.g. "port"
  SourceLoc key_loc;    // where the key is written
  SourceLoc value_loc;  // where the value is written; the key's position when the value is null
  YamlNode value;
};

/// What a scalar resolves to under the YAML 1.2 core schema (quoted scalars are strings).
enum class ScalarKind { kNull, kBool, kInt, kFloat, kString };

class YamlReader {
 public:
  YamlReader(std::string file, std::vector<Diagnostic>* diagnostics);

  const std::string& file() const { return file_; }
  SourceLoc Loc(const YamlNode& node) const;
  void Error(const SourceLoc& loc, std::string message, std::string hint = "");

  /// "a string", "an integer", "a number", "a boolean", "null", "a list", "a map".
  static std::string Describe(const YamlNode& node);
  static ScalarKind KindOf(const YamlNode& node);

  /// The entries of `map` in source order. Reports keys that are not scalars, keys not in
  /// `known` ("unknown key 'k' " + `where`, with a did-you-mean hint) and repeated keys
  /// ("duplicate key 'k', first at ..."); none of those is returned.
  std::vector<Field> Entries(const YamlNode& map, std::span<const std::string_view> known,
                             std::string_view where);
  /// The same for a map whose keys are names the user chooses (models, services, env): every
  /// scalar key is accepted. `noun` words the repeat ("model 'x' is defined twice, first at
  /// ..."); "" words it as a duplicate key.
  std::vector<Field> NamedEntries(const YamlNode& map, std::string_view where,
                                  std::string_view noun = "");

  /// True if the value is a map; otherwise reports "expected a map for 'key', got ...".
  bool ExpectMap(const Field& f);

  std::optional<std::string> String(const Field& f);
  /// Any scalar but null, taken as written (args, env values: `1` stays "1").
  std::optional<std::string> Text(const Field& f);
  std::optional<int64_t> Int(const Field& f, int64_t min, int64_t max);
  std::optional<double> Number(const Field& f);
  std::optional<bool> Bool(const Field& f);
  std::optional<uint64_t> Size(const Field& f);
  std::optional<uint64_t> DurationMs(const Field& f);
  /// A string starting with '/'.
  std::optional<std::string> AbsolutePath(const Field& f);

  /// False, with "'key' contains a newline; a unit file value cannot" at `loc`, when `value`
  /// could not be written into a systemd unit where `use` says (UnitValueProblem). Every manifest
  /// value that reaches a unit file passes here.
  bool UnitValue(const SourceLoc& loc, std::string_view key, const std::string& value,
                 UnitTextUse use = UnitTextUse::kRaw);
  /// UnitValue for every item of a list field (args, command), each at its own position; the
  /// first item (command's executable) as kRaw, the others as `rest`.
  bool UnitValues(const Field& f, const std::vector<std::string>& values, UnitTextUse first,
                  UnitTextUse rest);
  /// One of `values`; otherwise "bad <key> 'x'" with a did-you-mean or the list of values.
  std::optional<std::string> Enum(const Field& f, std::span<const std::string_view> values);
  /// A list of strings, or (when `allow_single`) one string standing for a list of one.
  std::optional<std::vector<std::string>> StringList(const Field& f, bool allow_single);
  /// A list of scalars, each taken as written.
  std::optional<std::vector<std::string>> TextList(const Field& f);
  /// A list of distinct integers >= `min`.
  std::optional<std::vector<int>> DistinctIntList(const Field& f, int min);

 private:
  void TypeError(const Field& f, std::string_view expected);
  // A size or duration: a string or integer that `parse` accepts; else a diagnostic.
  // Above the limit ("must be at most 365d") is said apart from malformed.
  std::optional<uint64_t> Quantity(const Field& f, const char* what,
                                   std::optional<uint64_t> (*parse)(std::string_view),
                                   bool (*too_large)(std::string_view), const char* limit,
                                   const char* example);
  std::vector<Field> EntriesImpl(const YamlNode& map,
                                 const std::span<const std::string_view>* known,
                                 std::string_view where, std::string_view noun);

  std::string file_;
  std::vector<Diagnostic>* diagnostics_;
};

}  // namespace berth::manifests
