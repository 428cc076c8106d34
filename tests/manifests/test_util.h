// Helpers for the manifest tests: load inline YAML and look at the diagnostics as text.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "manifests/loader.h"

namespace berth::testing {

/// A valid manifest the tests start from: one model, one vLLM service on two GPUs.
inline constexpr const char* kBase = R"(berth: 1
models:
  minimax-m25:
    source: hf://MiniMaxAI/MiniMax-M2.5
services:
  vllm-minimax-m25:
    model: minimax-m25
    engine: vllm
    gpus: [0, 1]
    port: 8000
    vllm: {tensor_parallel_size: 2}
)";

inline std::vector<std::string> ToStrings(const LoadResult& result) {
  std::vector<std::string> out;
  for (const Diagnostic& d : result.diagnostics) out.push_back(d.ToString());
  return out;
}

/// The diagnostics of one in-memory file named "berth.yaml", as "FILE:LINE:COL: message (hint)".
inline std::vector<std::string> Problems(const std::string& yaml) {
  return ToStrings(LoadManifestTexts({{"berth.yaml", yaml}}));
}

inline LoadResult Load(const std::string& yaml) {
  return LoadManifestTexts({{"berth.yaml", yaml}});
}

}  // namespace berth::testing
