// The header of a GGUF file (llama.cpp's model format), as far as berth's preflight needs it:
// the magic, the version and general.architecture. The file comes from the Hub and is
// untrusted: the caller reads a bounded prefix, and the parse never throws nor reads past it.
// Format: ggml-org/ggml docs/gguf.md (little-endian: "GGUF", uint32 version, uint64 tensor
// count, uint64 metadata count, then key/value pairs: a string key, a uint32 type, the value).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace berth {

struct GgufHeader {
  uint32_t version = 0;
  /// general.architecture ("llama", "qwen3moe", ...); "" when the prefix read does not reach
  /// it (the key is almost always first) or the file has none.
  std::string architecture;
  /// Why llama.cpp cannot load it, "" for a GGUF file of version 2 or 3: "is not a GGUF file
  /// (it starts with ...)", "is GGUF version 1, which llama.cpp no longer reads", "is cut
  /// short". Said after the file's path.
  std::string problem;
  bool operator==(const GgufHeader&) const = default;
};

/// The most of a GGUF file berth reads.
constexpr size_t kMaxGgufHeaderBytes = size_t{1} << 20;

/// Parses the first bytes of a GGUF file (at most kMaxGgufHeaderBytes of them).
GgufHeader ParseGgufHeader(std::string_view prefix);

}  // namespace berth
