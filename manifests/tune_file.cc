#include "manifests/tune_file.h"

#include <algorithm>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string_view>
#include <system_error>
#include <tuple>
#include <utility>

#include "core/read_file.h"
#include "manifests/names.h"
#include "manifests/yaml_flow.h"
#include "manifests/yaml_parse.h"
#include "manifests/yaml_reader.h"

namespace berth {
namespace {

using manifests::Field;
using manifests::ScalarKind;
using manifests::YamlNode;
using manifests::YamlReader;

constexpr std::string_view kTopKeys[] = {"berth_tune", "service", "baseline", "candidates",
                                         "axes",       "load",    "objective"};
constexpr std::string_view kCandidateKeys[] = {"name", "set"};
constexpr std::string_view kLoadKeys[] = {"concurrency",  "num_prompts", "duration",
                                          "request_rate", "seed",        "prompt_tokens",
                                          "max_tokens",   "warmup",      "chat"};
constexpr std::string_view kObjectiveKeys[] = {"maximize", "ttft_p99", "tpot_p99", "e2e_p99"};
constexpr std::string_view kMetrics[] = {"output_tokens_per_second", "goodput"};
// The name the sweep and its report give the declared configuration (TuneSpec::baseline).
constexpr std::string_view kBaselineName = "declared";
constexpr uint64_t kDefaultDurationMs = 30'000;
constexpr size_t kMaxPathBytes = 200;
// Above this many, the count in a "too many candidates" message is "more than" it.
constexpr uint64_t kCountCap = 1'000'000'000;

std::string Quote(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out += '\'';
  out += s;
  out += '\'';
  return out;
}

bool IsWordChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-';
}

// Dot-separated segments, each [A-Za-z0-9_-]+.
bool IsSettingPath(std::string_view p) {
  if (p.empty() || p.size() > kMaxPathBytes) return false;
  size_t segment = 0;
  for (char c : p) {
    if (c == '.') {
      if (segment == 0) return false;
      segment = 0;
    } else if (IsWordChar(c)) {
      ++segment;
    } else {
      return false;
    }
  }
  return segment > 0;
}

// [A-Za-z0-9._-]{1,64}
bool IsCandidateName(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  return std::all_of(name.begin(), name.end(), [](char c) { return IsWordChar(c) || c == '.'; });
}

// Whether setting `a` and setting `b` touch the same value: the same path, or one inside the
// other ("vllm" and "vllm.tensor_parallel_size").
bool Overlap(std::string_view a, std::string_view b) {
  if (a.size() < b.size()) std::swap(a, b);
  return a.starts_with(b) && (a.size() == b.size() || a[b.size()] == '.');
}

std::string_view LastSegment(std::string_view path) {
  size_t dot = path.rfind('.');
  return dot == std::string_view::npos ? path : path.substr(dot + 1);
}

// A path with where it was written.
struct Placed {
  std::string path;
  SourceLoc loc;
};

// A candidate of `candidates:`, before the axes are combined with it.
struct Listed {
  std::string name;  // "" when not given
  SourceLoc loc;
  std::vector<TuneSetting> settings;
  std::vector<Placed> placed;  // the settings' paths and where each is written
};

struct Axis {
  Placed key;
  std::vector<std::string> values;  // flow text, distinct
};

// "threads=1 parallel=4": each setting as key=value, the key its path's last segment unless
// `full` or another setting of `settings` ends in the same segment.
std::string Spell(std::string prefix, std::span<const TuneSetting> settings, bool full) {
  for (const TuneSetting& s : settings) {
    std::string_view key = LastSegment(s.path);
    bool shared = std::count_if(settings.begin(), settings.end(), [&](const TuneSetting& o) {
                    return LastSegment(o.path) == key;
                  }) > 1;
    if (full || shared) key = s.path;
    if (!prefix.empty()) prefix += ' ';
    prefix += key;
    prefix += '=';
    prefix += s.value;
  }
  return prefix;
}

class TuneDecoder {
 public:
  TuneDecoder(const std::string& file, std::vector<Diagnostic>* diagnostics)
      : r_(file, diagnostics), diagnostics_(diagnostics) {}

  void Decode(const YamlNode& root, TuneSpec* spec) {
    const SourceLoc file_start{r_.file(), 1, 1};
    if (root.IsNull()) {
      r_.Error(file_start, "missing 'berth_tune: 1'", "every tune file starts with berth_tune: 1");
      return;
    }
    if (!root.IsMap()) {
      r_.Error(r_.Loc(root), "expected a map at the top level, got " + YamlReader::Describe(root),
               "a tune file maps berth_tune, service, candidates, axes, load and objective");
      return;
    }
    bool has_version = false, has_service = false;
    size_t sweep_problems = 0;
    for (const Field& f : r_.Entries(root, kTopKeys, "at the top level")) {
      const size_t before = diagnostics_->size();
      if (f.key == "berth_tune") {
        has_version = true;
        std::optional<int64_t> version = r_.Int(f, INT64_MIN, INT64_MAX);
        if (version && *version != 1)
          r_.Error(f.value_loc, "unsupported berth_tune version " + std::to_string(*version),
                   "this berth reads berth_tune: 1");
      } else if (f.key == "service") {
        has_service = true;
        if (std::optional<std::string> name = r_.String(f)) {
          if (std::string problem = manifests::UnitNameProblem(*name); !problem.empty())
            r_.Error(f.value_loc, Quote(*name) + " is not a valid service name: " + problem);
          else
            spec->service = *name;
        }
      } else if (f.key == "baseline") {
        if (std::optional<bool> v = r_.Bool(f)) spec->baseline = *v;
      } else if (f.key == "candidates") {
        candidates_ = f;
        DecodeCandidates(f);
        sweep_problems += diagnostics_->size() - before;
      } else if (f.key == "axes") {
        axes_key_ = f;
        DecodeAxes(f);
        sweep_problems += diagnostics_->size() - before;
      } else if (f.key == "load") {
        DecodeLoad(f, &spec->load);
      } else if (f.key == "objective") {
        DecodeObjective(f, &spec->objective);
      }
    }
    if (!has_version)
      r_.Error(file_start, "missing 'berth_tune: 1'", "every tune file starts with berth_tune: 1");
    if (!has_service)
      r_.Error(file_start, "missing 'service'",
               "name the service of the manifest to tune, e.g. service: chat");
    MakeCandidates(file_start, sweep_problems == 0, &spec->candidates);
  }

 private:
  // A setting's value as flow text; nullopt (reported) when it cannot be written as one.
  std::optional<std::string> Value(const Field& f) {
    std::optional<std::string> text = manifests::FlowText(f.value);
    if (!text)
      r_.Error(f.value_loc,
               "the value of " + Quote(f.key) + " nests deeper than " +
                   std::to_string(manifests::kMaxFlowDepth) + " or is longer than " +
                   std::to_string(manifests::kMaxFlowBytes / 1024) + " KiB",
               "a setting's value is a manifest value: a number, a string, a short list or map");
    return text;
  }

  bool CheckPath(const Field& f) {
    if (IsSettingPath(f.key)) return true;
    r_.Error(f.key_loc, "bad setting path " + Quote(f.key.substr(0, kMaxPathBytes)),
             "dot-separated names of letters, digits, '_' and '-', e.g. "
             "vllm.tensor_parallel_size");
    return false;
  }

  // Reports each path written inside another of `placed` ("vllm" and "vllm.max_num_seqs").
  void CheckNesting(const std::vector<Placed>& placed, std::string_view where) {
    for (size_t j = 0; j < placed.size(); ++j) {
      for (size_t i = 0; i < j; ++i) {
        if (!Overlap(placed[i].path, placed[j].path)) continue;
        r_.Error(placed[j].loc,
                 Quote(placed[j].path) + " and " + Quote(placed[i].path) +
                     " are one inside the other " + std::string(where) + ", first at " +
                     placed[i].loc.ToString(),
                 "set the inner value or the whole outer one, not both");
        break;
      }
    }
  }

  void DecodeCandidates(const Field& f) {
    if (!f.value.IsSequence()) {
      r_.Error(f.value_loc,
               "expected a list for 'candidates', got " + YamlReader::Describe(f.value),
               "e.g. candidates: [{name: tp4, set: {vllm.tensor_parallel_size: 4}}]");
      return;
    }
    if (f.value.size() == 0)
      r_.Error(f.value_loc, "'candidates' is empty",
               "list at least one, or leave the key out and give axes");
    std::map<std::string, SourceLoc> names;
    for (const YamlNode item : f.value) {
      Listed c;
      c.loc = r_.Loc(item);
      if (!item.IsMap()) {
        r_.Error(c.loc, "expected a map in 'candidates', got " + YamlReader::Describe(item),
                 "each candidate is {name: NAME, set: {PATH: VALUE, ...}}");
        continue;
      }
      bool has_set = false;
      for (const Field& g : r_.Entries(item, kCandidateKeys, "in a candidate")) {
        if (g.key == "name") {
          std::optional<std::string> name = r_.Text(g);
          if (!name) continue;
          if (!IsCandidateName(*name)) {
            r_.Error(g.value_loc, "bad candidate name " + Quote(name->substr(0, 80)),
                     "1-64 letters, digits, '.', '_' or '-'");
          } else if (*name == kBaselineName) {
            r_.Error(g.value_loc, "'declared' is the name of the declared configuration",
                     "the baseline is measured as 'declared'; name this candidate otherwise");
          } else if (auto [first, added] = names.emplace(*name, g.value_loc); !added) {
            r_.Error(g.value_loc, "candidate name " + Quote(*name) + " is used twice, first at " +
                                      first->second.ToString());
          } else {
            c.name = *name;
          }
        } else {
          has_set = true;
          if (!r_.ExpectMap(g)) continue;
          if (g.value.size() == 0)
            r_.Error(g.value_loc, "'set' is empty",
                     "a candidate sets at least one value; the declared configuration is the "
                     "baseline");
          for (const Field& s : r_.NamedEntries(g.value, "in set")) {
            if (!CheckPath(s)) continue;
            std::optional<std::string> value = Value(s);
            if (!value) continue;
            c.settings.push_back(TuneSetting{s.key, *value});
            c.placed.push_back(Placed{s.key, s.key_loc});
          }
          CheckNesting(c.placed, "in one candidate");
        }
      }
      if (!has_set)
        r_.Error(c.loc, "a candidate needs 'set'", "e.g. set: {vllm.tensor_parallel_size: 4}");
      listed_.push_back(std::move(c));
    }
  }

  void DecodeAxes(const Field& f) {
    if (!r_.ExpectMap(f)) return;
    if (f.value.size() == 0)
      r_.Error(f.value_loc, "'axes' is empty",
               "map each setting path to its values, e.g. llama_server.threads: [1, 2]");
    std::vector<Placed> placed;
    for (const Field& a : r_.NamedEntries(f.value, "in axes")) {
      if (!CheckPath(a)) continue;
      if (!a.value.IsSequence()) {
        r_.Error(a.value_loc,
                 "expected a list of values for axis " + Quote(a.key) + ", got " +
                     YamlReader::Describe(a.value),
                 "e.g. " + a.key + ": [1, 2]");
        continue;
      }
      if (a.value.size() == 0) r_.Error(a.value_loc, "axis " + Quote(a.key) + " has no values");
      Axis axis{Placed{a.key, a.key_loc}, {}};
      std::map<std::string, SourceLoc> seen;
      for (const YamlNode item : a.value) {
        const SourceLoc loc = r_.Loc(item);
        std::optional<std::string> value = Value(Field{a.key, loc, loc, item});
        if (!value) continue;
        if (auto [first, added] = seen.emplace(*value, loc); !added) {
          r_.Error(loc, *value + " is listed twice in axis " + Quote(a.key) + ", first at " +
                            first->second.ToString());
          continue;
        }
        axis.values.push_back(*value);
      }
      placed.push_back(axis.key);
      axes_.push_back(std::move(axis));
    }
    CheckNesting(placed, "in axes");
  }

  // The candidates: each listed one (or, with none listed, the declared configuration) with
  // every combination of the axes' values, the first axis changing slowest. `whole`: candidates
  // and axes were read without a problem (else what needs them all is not checked, and nothing
  // is made).
  void MakeCandidates(const SourceLoc& file_start, bool whole, std::vector<TuneCandidate>* out) {
    if (!candidates_ && !axes_key_) {
      r_.Error(file_start, "no candidates",
               "give 'candidates' (a list of settings), 'axes' (values to combine) or both");
      return;
    }
    const size_t before = diagnostics_->size();
    // A listed candidate may not set what an axis sets: the axis would overwrite it.
    for (const Listed& c : listed_) {
      for (const Placed& p : c.placed) {
        for (const Axis& a : axes_) {
          if (!Overlap(p.path, a.key.path)) continue;
          r_.Error(p.loc,
                   Quote(p.path) + " is set by a candidate and by the axis " + Quote(a.key.path) +
                       " at " + a.key.loc.ToString(),
                   "an axis sets its path on every candidate; remove one of the two");
          break;
        }
      }
    }
    if (!whole) return;
    // Two listed candidates with the same settings (in any order) would measure the same thing.
    std::map<std::vector<TuneSetting>, const Listed*, SettingsLess> seen;
    for (const Listed& c : listed_) {
      std::vector<TuneSetting> key = c.settings;
      std::sort(key.begin(), key.end(), SettingLess);
      if (auto [first, added] = seen.emplace(std::move(key), &c); !added) {
        r_.Error(c.loc,
                 "candidates " + Quote(DisplayName(*first->second)) + " and " +
                     Quote(DisplayName(c)) + " set the same values",
                 Quote(DisplayName(*first->second)) + " is at " + first->second->loc.ToString());
      }
    }
    uint64_t combinations = 1;
    std::string sizes;
    for (const Axis& a : axes_) {
      combinations = std::min(combinations * a.values.size(), kCountCap + 1);
      sizes += (sizes.empty() ? "" : " × ") + std::to_string(a.values.size());
    }
    const uint64_t bases = std::max<uint64_t>(listed_.size(), 1);
    const uint64_t total = std::min(bases * combinations, kCountCap + 1);
    if (total > kMaxTuneCandidates) {
      std::string count =
          total > kCountCap ? "more than " + std::to_string(kCountCap) : std::to_string(total);
      std::string hint = axes_.empty()     ? std::to_string(listed_.size()) + " listed candidates"
                         : listed_.empty() ? "axes of " + sizes + " values"
                                           : std::to_string(listed_.size()) +
                                                 " candidates × axes of " + sizes + " values";
      r_.Error(axes_key_ ? axes_key_->key_loc : candidates_->key_loc,
               "the tune file makes " + count + " candidates; at most " +
                   std::to_string(kMaxTuneCandidates),
               hint + "; remove values, or split the sweep into several tune files");
    }
    if (diagnostics_->size() != before) return;

    // Made in order; each with what its generated name spells: all its settings, or after a
    // given name only the axes' ones.
    struct Made {
      std::string prefix;  // the given name, when the name is generated from the axes' values
      size_t spelled_from = 0;
      bool generated = true;
    };
    std::vector<Made> made;
    std::vector<const Listed*> base_list;
    for (const Listed& c : listed_) base_list.push_back(&c);
    if (base_list.empty()) base_list.push_back(nullptr);
    for (const Listed* base : base_list) {
      std::vector<size_t> at(axes_.size(), 0);
      for (;;) {
        TuneCandidate c;
        Made m;
        if (base != nullptr) {
          c.settings = base->settings;
          c.loc = base->loc;
          if (!base->name.empty() && axes_.empty()) {
            c.name = base->name;
            m.generated = false;
          } else if (!base->name.empty()) {
            m.prefix = base->name;
            m.spelled_from = base->settings.size();
          }
        } else {
          c.loc = axes_key_->key_loc;
        }
        for (size_t i = 0; i < axes_.size(); ++i)
          c.settings.push_back(TuneSetting{axes_[i].key.path, axes_[i].values[at[i]]});
        out->push_back(std::move(c));
        made.push_back(std::move(m));
        // The next combination: the last axis changes fastest.
        size_t i = axes_.size();
        while (i > 0 && ++at[i - 1] == axes_[i - 1].values.size()) at[--i] = 0;
        if (i == 0) break;
      }
    }
    // Generated names, by last segments; where two come out the same, by full paths.
    std::map<std::string, int> uses;
    for (size_t i = 0; i < out->size(); ++i) {
      if (!made[i].generated) continue;
      TuneCandidate& c = (*out)[i];
      c.name = Spell(made[i].prefix, std::span(c.settings).subspan(made[i].spelled_from), false);
      ++uses[c.name];
    }
    for (size_t i = 0; i < out->size(); ++i) {
      TuneCandidate& c = (*out)[i];
      if (made[i].generated && uses[c.name] > 1)
        c.name = Spell(made[i].prefix, std::span(c.settings).subspan(made[i].spelled_from), true);
    }
  }

  static bool SettingLess(const TuneSetting& a, const TuneSetting& b) {
    return std::tie(a.path, a.value) < std::tie(b.path, b.value);
  }
  struct SettingsLess {
    bool operator()(const std::vector<TuneSetting>& a, const std::vector<TuneSetting>& b) const {
      return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(), SettingLess);
    }
  };
  static std::string DisplayName(const Listed& c) {
    return c.name.empty() ? Spell("", c.settings, false) : c.name;
  }

  void DecodeLoad(const Field& f, TuneLoad* load) {
    if (!r_.ExpectMap(f)) return;
    const Field* num_prompts = nullptr;
    const Field* duration = nullptr;
    const std::vector<Field> fields = r_.Entries(f.value, kLoadKeys, "in load");
    for (const Field& g : fields) {
      if (g.key == "concurrency") {
        if (auto v = r_.Int(g, 1, 10000)) load->concurrency = static_cast<int>(*v);
      } else if (g.key == "num_prompts") {
        num_prompts = &g;
        if (auto v = r_.Int(g, 1, 100'000'000)) load->num_prompts = static_cast<uint64_t>(*v);
      } else if (g.key == "duration") {
        duration = &g;
        std::optional<uint64_t> ms = r_.DurationMs(g);
        if (ms && *ms == 0) r_.Error(g.value_loc, "'duration' must be above 0");
        if (ms && *ms > 0) load->duration_ms = *ms;
      } else if (g.key == "request_rate") {
        const std::string& s = g.value.Scalar();
        if (g.value.IsScalar() && YamlReader::KindOf(g.value) != ScalarKind::kNull &&
            (s == "inf" || s == ".inf" || s == ".Inf" || s == ".INF")) {
          load->request_rate = 0;
        } else if (g.value.IsScalar() && (YamlReader::KindOf(g.value) == ScalarKind::kInt ||
                                          YamlReader::KindOf(g.value) == ScalarKind::kFloat)) {
          std::optional<double> rate = r_.Number(g);
          if (rate && (*rate <= 0 || *rate > 1e6))
            r_.Error(g.value_loc, "'request_rate' must be above 0 and at most 1000000, got " + s,
                     "requests per second, or inf (the default): each stream sends its next "
                     "request at once");
          else if (rate)
            load->request_rate = *rate;
        } else {
          r_.Error(g.value_loc, "expected a number or inf for 'request_rate', got " +
                                    YamlReader::Describe(g.value));
        }
      } else if (g.key == "seed") {
        if (auto v = r_.Int(g, 0, INT64_MAX)) load->seed = static_cast<uint64_t>(*v);
      } else if (g.key == "prompt_tokens") {
        if (auto v = r_.Int(g, 1, 1'000'000)) load->prompt_tokens = static_cast<int>(*v);
      } else if (g.key == "max_tokens") {
        if (auto v = r_.Int(g, 1, 1'000'000)) load->max_tokens = static_cast<int>(*v);
      } else if (g.key == "warmup") {
        if (auto v = r_.Int(g, 0, 1'000'000)) load->warmup_requests = static_cast<uint64_t>(*v);
      } else if (g.key == "chat") {
        if (auto v = r_.Bool(g)) load->chat = *v;
      }
    }
    if (num_prompts != nullptr && duration != nullptr) {
      const Field* later = num_prompts->key_loc.line > duration->key_loc.line ||
                                   (num_prompts->key_loc.line == duration->key_loc.line &&
                                    num_prompts->key_loc.column > duration->key_loc.column)
                               ? num_prompts
                               : duration;
      r_.Error(later->key_loc, "'num_prompts' and 'duration' are both given",
               "give one: num_prompts sends that many requests, duration measures for that long");
    }
    if (num_prompts != nullptr) load->duration_ms = 0;
  }

  void DecodeObjective(const Field& f, TuneObjective* objective) {
    if (!r_.ExpectMap(f)) return;
    std::optional<SourceLoc> goodput_at;
    bool has_limit = false;
    for (const Field& g : r_.Entries(f.value, kObjectiveKeys, "in objective")) {
      if (g.key == "maximize") {
        std::optional<std::string> metric = r_.Enum(g, kMetrics);
        if (metric == "goodput") {
          objective->maximize = TuneObjective::Metric::kGoodput;
          goodput_at = g.value_loc;
        } else if (metric) {
          objective->maximize = TuneObjective::Metric::kOutputTokensPerSecond;
        }
        continue;
      }
      has_limit = true;
      std::optional<uint64_t> ms = r_.DurationMs(g);
      if (!ms) continue;
      if (*ms == 0) {
        r_.Error(g.value_loc, Quote(g.key) + " must be above 0",
                 "leave the key out to set no limit");
        continue;
      }
      double* limit = g.key == "ttft_p99"   ? &objective->ttft_p99_ms
                      : g.key == "tpot_p99" ? &objective->tpot_p99_ms
                                            : &objective->e2e_p99_ms;
      *limit = static_cast<double>(*ms);
    }
    if (goodput_at && !has_limit)
      r_.Error(*goodput_at, "'maximize: goodput' needs a limit",
               "goodput counts the requests that meet ttft_p99, tpot_p99 and e2e_p99; set at "
               "least one");
  }

  YamlReader r_;
  std::vector<Diagnostic>* diagnostics_;
  std::optional<Field> candidates_, axes_key_;
  std::vector<Listed> listed_;
  std::vector<Axis> axes_;
};

std::string TooLarge(uint64_t size) {
  return "larger than berth reads (" + std::to_string(size) + " bytes; at most " +
         std::to_string(kMaxManifestFileBytes) +
         " bytes, 4 MiB): a tune file is a few KiB, check that this is the file meant";
}

}  // namespace

TuneLoadResult LoadTuneText(const std::string& file_name, const std::string& text) {
  TuneLoadResult result;
  result.spec.file = file_name;
  result.spec.load.duration_ms = kDefaultDurationMs;
  if (text.size() > kMaxManifestFileBytes) {
    result.diagnostics.push_back({SourceLoc{file_name, 0, 0}, TooLarge(text.size()), ""});
    return result;
  }
  YamlReader r(file_name, &result.diagnostics);
  std::optional<manifests::YamlDocument> doc = manifests::ParseDocument(r, text);
  if (!doc) return result;
  try {
    TuneDecoder(file_name, &result.diagnostics).Decode(doc->root(), &result.spec);
  } catch (const std::exception& e) {
    // Reads go through YamlReader, which does not throw; this is a last line of defence.
    r.Error(SourceLoc{file_name, 0, 0}, std::string("cannot read YAML: ") + e.what());
  }
  std::stable_sort(result.diagnostics.begin(), result.diagnostics.end(),
                   [](const Diagnostic& a, const Diagnostic& b) {
                     return std::tie(a.loc.line, a.loc.column) < std::tie(b.loc.line, b.loc.column);
                   });
  return result;
}

TuneLoadResult LoadTuneFile(const std::string& path) {
  auto refuse = [&](std::string message, std::string hint = "") {
    TuneLoadResult result;
    result.spec.file = path;
    result.diagnostics.push_back({SourceLoc{path, 0, 0}, std::move(message), std::move(hint)});
    return result;
  };
  // The size first, for a message that speaks of tune files; the read bounds it again.
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(path, ec);
  if (!ec && size > kMaxManifestFileBytes) return refuse(TooLarge(size));
  Result<std::string> text =
      ReadRegularFile(path, {.max_bytes = kMaxManifestFileBytes, .follow_links = true});
  if (!text.ok() && text.status().code() == Status::Code::kNotFound)
    return refuse("no such file", "pass the tune file's path");
  if (!text.ok()) return refuse(text.status().message());
  return LoadTuneText(path, *text);
}

}  // namespace berth
