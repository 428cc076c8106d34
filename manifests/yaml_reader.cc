#include "manifests/yaml_reader.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <unordered_map>
#include <utility>

#include "core/unit_text.h"
#include "core/units.h"
#include "manifests/did_you_mean.h"

namespace berth::manifests {
namespace {

bool IsDigits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

std::string_view WithoutSign(std::string_view s) {
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) s.remove_prefix(1);
  return s;
}

// [-+]?[0-9]+
bool LooksInt(std::string_view s) { return IsDigits(WithoutSign(s)); }

// [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?, or .inf / .nan as YAML writes them.
bool LooksFloat(std::string_view s) {
  for (std::string_view special : {".inf", ".Inf", ".INF", ".nan", ".NaN", ".NAN"}) {
    if (WithoutSign(s) == special || s == special) return true;
  }
  s = WithoutSign(s);
  size_t e = s.find_first_of("eE");
  std::string_view mantissa = s.substr(0, e);
  if (e != std::string_view::npos && !IsDigits(WithoutSign(s.substr(e + 1)))) return false;
  size_t dot = mantissa.find('.');
  if (dot == std::string_view::npos) return IsDigits(mantissa);
  std::string_view whole = mantissa.substr(0, dot), frac = mantissa.substr(dot + 1);
  if (whole.empty()) return IsDigits(frac);
  return IsDigits(whole) && (frac.empty() || IsDigits(frac));
}

// (Appended, not "'" + std::string(key) + "'": GCC 12 at -O3 warns of a memcpy overlap in
// that, wrongly, and the package build treats warnings as errors.)
std::string Quote(std::string_view key) {
  std::string out;
  out.reserve(key.size() + 2);
  out += '\'';
  out += key;
  out += '\'';
  return out;
}

}  // namespace

YamlReader::YamlReader(std::string file, std::vector<Diagnostic>* diagnostics)
    : file_(std::move(file)), diagnostics_(diagnostics) {}

SourceLoc YamlReader::Loc(const YamlNode& node) const {
  YamlMark mark = node.Mark();
  if (mark.is_null()) return SourceLoc{file_, 0, 0};
  return SourceLoc{file_, mark.line + 1, mark.column + 1};
}

void YamlReader::Error(const SourceLoc& loc, std::string message, std::string hint) {
  diagnostics_->push_back(Diagnostic{loc, std::move(message), std::move(hint)});
}

ScalarKind YamlReader::KindOf(const YamlNode& node) {
  if (node.IsNull()) return ScalarKind::kNull;
  const std::string& tag = node.Tag();
  if (tag == "!" || tag == "tag:yaml.org,2002:str") return ScalarKind::kString;
  const std::string& s = node.Scalar();
  if (s == "true" || s == "True" || s == "TRUE" || s == "false" || s == "False" || s == "FALSE") {
    return ScalarKind::kBool;
  }
  if (LooksInt(s)) return ScalarKind::kInt;
  if (LooksFloat(s)) return ScalarKind::kFloat;
  return ScalarKind::kString;
}

std::string YamlReader::Describe(const YamlNode& node) {
  if (node.IsMap()) return "a map";
  if (node.IsSequence()) return "a list";
  switch (KindOf(node)) {
    case ScalarKind::kNull:
      return "null";
    case ScalarKind::kBool:
      return "a boolean";
    case ScalarKind::kInt:
      return "an integer";
    case ScalarKind::kFloat:
      return "a number";
    case ScalarKind::kString:
      return "a string";
  }
  return "something else";
}

void YamlReader::TypeError(const Field& f, std::string_view expected) {
  Error(f.value_loc, "expected " + std::string(expected) + " for " + Quote(f.key) + ", got " +
                         Describe(f.value));
}

std::vector<Field> YamlReader::Entries(const YamlNode& map, std::span<const std::string_view> known,
                                       std::string_view where) {
  return EntriesImpl(map, &known, where, "");
}

std::vector<Field> YamlReader::NamedEntries(const YamlNode& map, std::string_view where,
                                            std::string_view noun) {
  return EntriesImpl(map, nullptr, where, noun);
}

std::vector<Field> YamlReader::EntriesImpl(const YamlNode& map,
                                           const std::span<const std::string_view>* known,
                                           std::string_view where, std::string_view noun) {
  std::vector<Field> fields;
  fields.reserve(map.size());
  // Repeats: a look through the fields kept so far in a small map (a service's dozen keys), a
  // hash of the names in a big one (10,000 services).
  constexpr size_t kLinear = 16;
  const bool big = map.size() > kLinear;
  std::unordered_map<std::string_view, size_t> kept;  // name -> its index in fields, when big
  if (big) kept.reserve(map.size());
  auto first_of = [&](const std::string& name) -> const Field* {
    if (big) {
      auto it = kept.find(name);
      return it == kept.end() ? nullptr : &fields[it->second];
    }
    for (const Field& f : fields)
      if (f.key == name) return &f;
    return nullptr;
  };
  for (size_t i = 0; i < map.size(); ++i) {
    const YamlNode key = map.KeyAt(i);
    const YamlNode value = map.ValueAt(i);
    SourceLoc key_loc = Loc(key);
    if (!key.IsScalar()) {
      Error(key_loc, "expected a name as key " + std::string(where) + ", got " + Describe(key));
      continue;
    }
    const std::string& text = key.Scalar();
    if (known != nullptr) {
      bool found = false;
      for (std::string_view k : *known) found = found || k == text;
      if (!found) {
        Error(key_loc, "unknown key " + Quote(text) + " " + std::string(where),
              DidYouMean(text, *known));
        continue;
      }
    }
    if (const Field* first = first_of(text)) {
      std::string what = noun.empty() ? "duplicate key " + Quote(text)
                                      : std::string(noun) + " " + Quote(text) + " is defined twice";
      Error(key_loc, what + ", first at " + first->key_loc.ToString());
      continue;
    }
    if (big) kept.emplace(text, fields.size());
    Field f{text, key_loc, key_loc, value};
    if (!value.IsNull()) f.value_loc = Loc(value);
    fields.push_back(std::move(f));
  }
  return fields;
}

bool YamlReader::ExpectMap(const Field& f) {
  if (f.value.IsMap()) return true;
  TypeError(f, "a map");
  return false;
}

std::optional<std::string> YamlReader::String(const Field& f) {
  if (f.value.IsScalar() && KindOf(f.value) == ScalarKind::kString) return f.value.Scalar();
  TypeError(f, "a string");
  return std::nullopt;
}

std::optional<std::string> YamlReader::Text(const Field& f) {
  if (f.value.IsScalar() && KindOf(f.value) != ScalarKind::kNull) return f.value.Scalar();
  TypeError(f, "a string");
  return std::nullopt;
}

std::optional<int64_t> YamlReader::Int(const Field& f, int64_t min, int64_t max) {
  if (!f.value.IsScalar() || KindOf(f.value) != ScalarKind::kInt) {
    TypeError(f, "an integer");
    return std::nullopt;
  }
  std::string_view s = f.value.Scalar();
  if (!s.empty() && s[0] == '+') s.remove_prefix(1);
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  bool in_range = ec == std::errc() && end == s.data() + s.size() && v >= min && v <= max;
  if (!in_range) {
    std::string range = max >= INT32_MAX
                            ? "at least " + std::to_string(min)
                            : "between " + std::to_string(min) + " and " + std::to_string(max);
    Error(f.value_loc, Quote(f.key) + " must be " + range + ", got " + f.value.Scalar());
    return std::nullopt;
  }
  return v;
}

std::optional<double> YamlReader::Number(const Field& f) {
  ScalarKind kind = f.value.IsScalar() ? KindOf(f.value) : ScalarKind::kNull;
  if (!f.value.IsScalar() || (kind != ScalarKind::kInt && kind != ScalarKind::kFloat)) {
    TypeError(f, "a number");
    return std::nullopt;
  }
  // YAML's .nan and .inf are numbers to YAML but limits to nobody: a floor of .nan compares
  // false with every figure and so checks nothing, and .inf can never be met.
  const std::string& s = f.value.Scalar();
  std::string_view bare = WithoutSign(s);
  double v = std::strtod(s.c_str(), nullptr);
  bool special = bare.size() > 1 && bare[0] == '.' &&
                 (bare[1] == 'n' || bare[1] == 'N' || bare[1] == 'i' || bare[1] == 'I');
  if (special || !std::isfinite(v)) {
    Error(f.value_loc, "'" + f.key + "' must be a finite number, got '" + s + "'",
          ".nan and .inf are not limits; write the number itself");
    return std::nullopt;
  }
  return v;
}

std::optional<bool> YamlReader::Bool(const Field& f) {
  if (!f.value.IsScalar() || KindOf(f.value) != ScalarKind::kBool) {
    TypeError(f, "a boolean (true or false)");
    return std::nullopt;
  }
  return f.value.Scalar()[0] != 'f' && f.value.Scalar()[0] != 'F';
}

std::optional<uint64_t> YamlReader::Quantity(const Field& f, const char* what,
                                             std::optional<uint64_t> (*parse)(std::string_view),
                                             bool (*too_large)(std::string_view), const char* limit,
                                             const char* example) {
  ScalarKind kind = f.value.IsScalar() ? KindOf(f.value) : ScalarKind::kNull;
  if (kind != ScalarKind::kString && kind != ScalarKind::kInt) {
    TypeError(f, std::string("a ") + what);
    return std::nullopt;
  }
  std::optional<uint64_t> v = parse(f.value.Scalar());
  if (!v && too_large(f.value.Scalar())) {
    Error(f.value_loc,
          Quote(f.key) + " must be at most " + limit + ", got '" + f.value.Scalar() + "'");
  } else if (!v) {
    Error(f.value_loc,
          std::string("bad ") + what + " '" + f.value.Scalar() + "' for " + Quote(f.key),
          std::string("use e.g. ") + example);
  }
  return v;
}

std::optional<uint64_t> YamlReader::Size(const Field& f) {
  return Quantity(f, "size", &ParseSize, &SizeTooLarge, "1 EiB", "230GB, 96GiB");
}

std::optional<uint64_t> YamlReader::DurationMs(const Field& f) {
  return Quantity(f, "duration", &ParseDurationMs, &DurationTooLong, "365d",
                  "30m, 1h30m, 45s, 500ms");
}

std::optional<std::string> YamlReader::AbsolutePath(const Field& f) {
  std::optional<std::string> path = String(f);
  if (path && (path->empty() || (*path)[0] != '/')) {
    Error(f.value_loc, Quote(f.key) + " must be an absolute path, got '" + *path + "'");
    return std::nullopt;
  }
  return path;
}

bool YamlReader::UnitValue(const SourceLoc& loc, std::string_view key, const std::string& value,
                           UnitTextUse use) {
  std::string problem = UnitValueProblem(value, use);
  if (problem.empty()) return true;
  Error(loc, Quote(key) + " " + problem,
        "berth writes it into the service's systemd unit; remove the control character");
  return false;
}

bool YamlReader::UnitValues(const Field& f, const std::vector<std::string>& values,
                            UnitTextUse first, UnitTextUse rest) {
  bool ok = true;
  size_t i = 0;
  for (const YamlNode item : f.value) {
    if (i < values.size()) ok = UnitValue(Loc(item), f.key, values[i], i == 0 ? first : rest) && ok;
    ++i;
  }
  return ok;
}

std::optional<std::string> YamlReader::Enum(const Field& f,
                                            std::span<const std::string_view> values) {
  std::optional<std::string> text = String(f);
  if (!text) return std::nullopt;
  for (std::string_view v : values) {
    if (v == *text) return text;
  }
  std::string hint = DidYouMean(*text, values);
  if (hint.empty()) {
    hint = "use ";
    for (size_t i = 0; i < values.size(); ++i) {
      if (i > 0) hint += i + 1 == values.size() ? " or " : ", ";
      hint += values[i];
    }
  }
  Error(f.value_loc, "bad " + f.key + " '" + *text + "'", hint);
  return std::nullopt;
}

std::optional<std::vector<std::string>> YamlReader::StringList(const Field& f, bool allow_single) {
  if (allow_single && f.value.IsScalar() && KindOf(f.value) == ScalarKind::kString) {
    return std::vector<std::string>{f.value.Scalar()};
  }
  if (!f.value.IsSequence()) {
    TypeError(f, allow_single ? "a string or a list of strings" : "a list of strings");
    return std::nullopt;
  }
  std::vector<std::string> out;
  bool ok = true;
  for (const YamlNode item : f.value) {
    if (item.IsScalar() && KindOf(item) == ScalarKind::kString) {
      out.push_back(item.Scalar());
    } else {
      Error(Loc(item), "expected a string in " + Quote(f.key) + ", got " + Describe(item));
      ok = false;
    }
  }
  if (!ok) return std::nullopt;
  return out;
}

std::optional<std::vector<std::string>> YamlReader::TextList(const Field& f) {
  if (!f.value.IsSequence()) {
    TypeError(f, "a list of strings");
    return std::nullopt;
  }
  std::vector<std::string> out;
  bool ok = true;
  for (const YamlNode item : f.value) {
    if (item.IsScalar() && KindOf(item) != ScalarKind::kNull) {
      out.push_back(item.Scalar());
    } else {
      Error(Loc(item), "expected a string in " + Quote(f.key) + ", got " + Describe(item));
      ok = false;
    }
  }
  if (!ok) return std::nullopt;
  return out;
}

std::optional<std::vector<int>> YamlReader::DistinctIntList(const Field& f, int min) {
  if (!f.value.IsSequence()) {
    TypeError(f, "a list of integers");
    return std::nullopt;
  }
  std::vector<int> out;
  std::map<int, SourceLoc> seen;
  bool ok = true;
  for (const YamlNode item : f.value) {
    SourceLoc loc = Loc(item);
    if (!item.IsScalar() || KindOf(item) != ScalarKind::kInt) {
      Error(loc, "expected an integer in " + Quote(f.key) + ", got " + Describe(item));
      ok = false;
      continue;
    }
    std::optional<int64_t> v = Int(Field{f.key, loc, loc, item}, min, INT32_MAX);
    if (!v) {
      ok = false;
      continue;
    }
    int n = static_cast<int>(*v);
    auto [first, inserted] = seen.emplace(n, loc);
    if (!inserted) {
      Error(loc, std::to_string(n) + " is listed twice in " + Quote(f.key) + ", first at " +
                     first->second.ToString());
      ok = false;
      continue;
    }
    out.push_back(n);
  }
  if (!ok) return std::nullopt;
  return out;
}

}  // namespace berth::manifests
