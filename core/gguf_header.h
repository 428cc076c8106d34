// The header of a GGUF file (llama.cpp's model format), as far as berth's preflight needs it:
// the magic, the version and general.architecture. The file comes from the Hub and is
// untrusted: the caller reads a bounded prefix, and the parse never throws nor reads past it.
// Format: ggml-org/ggml docs/gguf.md (little-endian: "GGUF", uint32 version, uint64 tensor
// count, uint64 metadata count, then key/value pairs: a string key, a uint32 type, the value).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace berth {

/// What llama.cpp allocates for a GGUF model, read from its metadata and tensor list (both come
/// before the tensor data): the figures berth derives a llama-server's GPU claim from
/// (planners/llama_claim.h). Keys from llama.cpp's src/llama-arch.cpp; ggml type sizes from
/// ggml/src/ggml-common.h (commit 80fb11a).
struct GgufModel {
  std::string architecture;       // general.architecture
  uint64_t block_count = 0;       // <arch>.block_count: the repeating layers (blk.N.*)
  uint64_t context_length = 0;    // <arch>.context_length: the training context, tokens
  uint64_t embedding_length = 0;  // <arch>.embedding_length
  uint64_t head_count = 0;        // <arch>.attention.head_count
  /// <arch>.attention.head_count_kv: one value for every block, or one per block (at most
  /// kMaxGgufBlocks); empty when the file has none (then head_count).
  std::vector<uint64_t> head_count_kv;
  uint64_t key_length = 0;    // <arch>.attention.key_length; 0: absent (embedding / heads)
  uint64_t value_length = 0;  // <arch>.attention.value_length; likewise
  uint64_t vocab_size = 0;    // tokenizer.ggml.tokens' count, else <arch>.vocab_size
  /// Bytes of the input layer's tensors (token_embd.*, token_types.*, position_embd.*), which
  /// llama.cpp always keeps on the CPU (llama_model::load_tensors, dev_input).
  uint64_t input_bytes = 0;
  /// Bytes of the other tensors outside blk.N.*: the output layer (output.weight,
  /// output_norm.weight, rope factors), placed like a layer past the last block.
  uint64_t output_bytes = 0;
  std::vector<uint64_t> block_bytes;  // bytes of blk.N.* for each N < block_count
  /// Why the figures are not whole, "" when they are; said after the file's path, like
  /// GgufHeader::problem: "has a tensor 'x' of ggml type 99, which berth does not know: its
  /// weights are unknown", "is cut short: its metadata is longer than the 67108864 bytes read".
  std::string problem;

  /// Bytes of every tensor: what llama.cpp reads of the file.
  uint64_t TensorBytes() const;
  /// KV heads of block `il` (head_count_kv per block, for every block, or head_count).
  uint64_t HeadsKv(uint64_t il) const;
  uint64_t KeyLength() const;    // key_length, else embedding_length / head_count
  uint64_t ValueLength() const;  // likewise
  bool operator==(const GgufModel&) const = default;
};

/// The most of a GGUF file berth reads for its GgufModel: tokenizer arrays take megabytes.
constexpr size_t kMaxGgufModelBytes = size_t{64} << 20;
/// The most blocks berth believes a file has (the largest models have about 100).
constexpr uint64_t kMaxGgufBlocks = 4096;

/// Bytes of `elements` values of ggml type `type` (GGML_TYPE_*: F32 0, F16 1, Q4_0 2, ...,
/// BF16 30, MXFP4 39); nullopt for a type berth does not know or a count that is not a whole
/// number of the type's blocks.
std::optional<uint64_t> GgmlBytes(uint32_t type, uint64_t elements);

/// Parses a GGUF file's first bytes (at most kMaxGgufModelBytes of them) for its GgufModel.
/// Untrusted input: never throws, never reads past `prefix`, never allocates more than it
/// holds; a file cut short, or one whose figures do not add up, says so in `problem`.
GgufModel ParseGgufModel(std::string_view prefix);

struct GgufHeader {
  uint32_t version = 0;
  /// general.architecture ("llama", "qwen3moe", ...); "" when the prefix read does not reach
  /// it (the key is almost always first) or the file has none.
  std::string architecture;
  /// Why llama.cpp cannot load it, "" for a GGUF file of version 2 or 3: "is not a GGUF file
  /// (it starts with ...)", "is GGUF version 1, which llama.cpp no longer reads", "is cut
  /// short". Said after the file's path.
  std::string problem;
  /// The figures of the file a llama-server service names (llama_server.model_file), read by
  /// ReadGgufModels; unset for the others, or when not read.
  std::optional<GgufModel> model;
  bool operator==(const GgufHeader&) const = default;
};

/// The most of a GGUF file berth reads.
constexpr size_t kMaxGgufHeaderBytes = size_t{1} << 20;

/// Parses the first bytes of a GGUF file (at most kMaxGgufHeaderBytes of them).
GgufHeader ParseGgufHeader(std::string_view prefix);

}  // namespace berth
