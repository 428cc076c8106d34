// A model's config.json, as far as berth's preflight needs it: the architectures it names and
// its model_type (which decides, say, whether vLLM has an MTP draft for it).
// config.json comes from the Hub and is untrusted: a bounded read (the caller's) and a parse
// that never throws.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace berth {

struct ModelConfig {
  std::vector<std::string> architectures;  // "MiniMaxM2ForCausalLM", ...
  /// Why berth cannot use it, "" when it names its architectures: "missing", "not JSON
  /// (...)", "names no architectures", "larger than 1 MiB". Said after the file's path.
  std::string problem;
  /// "model_type": "minimax_m2"; "" when absent or not a short name (at most
  /// kMaxModelTypeBytes of letters, digits, '_', '-', '.').
  std::string model_type = "";
  bool operator==(const ModelConfig&) const = default;
};

/// The longest model_type berth keeps.
constexpr size_t kMaxModelTypeBytes = 100;

/// The most of config.json berth reads; a larger file is a problem, not a crash.
constexpr size_t kMaxModelConfigBytes = size_t{1} << 20;

/// Parses config.json text: "architectures" must be a non-empty array of non-empty strings;
/// "model_type" is kept when it is a short name, and is no problem when absent.
ModelConfig ParseModelConfig(std::string_view text);

}  // namespace berth
