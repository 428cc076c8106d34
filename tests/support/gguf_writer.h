// Writes the head of a GGUF file (llama.cpp's model format: ggml-org/ggml docs/gguf.md), the
// metadata and the tensor list, for tests of berth's GGUF reader and of the claims derived from
// it. No tensor data: berth never reads past the tensor list.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace berth::testing {

class GgufWriter {
 public:
  // GGUF value types.
  static constexpr uint32_t kU32 = 4, kString = 8, kArray = 9, kU64 = 10;
  // ggml tensor types.
  static constexpr uint32_t kF32 = 0, kF16 = 1, kQ8_0 = 8, kQ4_K = 12;

  GgufWriter& Str(const std::string& key, const std::string& value) {
    Key(key, kString);
    String(&kv_, value);
    ++kvs_;
    return *this;
  }
  GgufWriter& U32(const std::string& key, uint32_t v) {
    Key(key, kU32);
    Put(&kv_, v, 4);
    ++kvs_;
    return *this;
  }
  GgufWriter& U32s(const std::string& key, const std::vector<uint32_t>& v) {
    Key(key, kArray);
    Put(&kv_, kU32, 4);
    Put(&kv_, v.size(), 8);
    for (uint32_t x : v) Put(&kv_, x, 4);
    ++kvs_;
    return *this;
  }
  /// An array of `count` short strings ("t0", "t1", ...): a tokenizer's tokens.
  GgufWriter& Strings(const std::string& key, uint64_t count) {
    Key(key, kArray);
    Put(&kv_, kString, 4);
    Put(&kv_, count, 8);
    for (uint64_t i = 0; i < count; ++i) String(&kv_, "t" + std::to_string(i));
    ++kvs_;
    return *this;
  }
  /// Raw bytes after the metadata written so far, counted as `kvs` more pairs (hostile input).
  GgufWriter& Raw(const std::string& bytes, uint64_t kvs = 1) {
    kv_ += bytes;
    kvs_ += kvs;
    return *this;
  }
  GgufWriter& Tensor(const std::string& name, uint32_t type, const std::vector<uint64_t>& dims) {
    String(&tensors_, name);
    Put(&tensors_, dims.size(), 4);
    for (uint64_t d : dims) Put(&tensors_, d, 8);
    Put(&tensors_, type, 4);
    Put(&tensors_, 0, 8);  // offset: unread
    ++n_tensors_;
    return *this;
  }
  /// The file's head; `tensors` overrides the tensor count it declares.
  std::string Bytes(uint32_t version = 3, int64_t tensors = -1) const {
    std::string out = "GGUF";
    Put(&out, version, 4);
    Put(&out, tensors < 0 ? n_tensors_ : static_cast<uint64_t>(tensors), 8);
    Put(&out, kvs_, 8);
    return out + kv_ + tensors_;
  }

  static void Put(std::string* out, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
  static void String(std::string* out, const std::string& s) {
    Put(out, s.size(), 8);
    *out += s;
  }

 private:
  void Key(const std::string& key, uint32_t type) {
    String(&kv_, key);
    Put(&kv_, type, 4);
  }
  std::string kv_, tensors_;
  uint64_t kvs_ = 0, n_tensors_ = 0;
};

/// A llama-architecture model of the given shape (llama.cpp's tensor names and shapes,
/// src/llama-model.cpp LLM_ARCH_LLAMA): token_embd and output of vocab × embd, per block the
/// attention (q, k, v, o) and the feed-forward (gate, up, down) in `type`, norms in F32.
inline GgufWriter LlamaShaped(uint64_t embd, uint64_t layers, uint64_t ff, uint64_t heads,
                              uint64_t kv_heads, uint64_t vocab, uint64_t ctx, uint32_t type) {
  GgufWriter w;
  const uint64_t head = embd / heads;
  w.Str("general.architecture", "llama")
      .U32("llama.context_length", static_cast<uint32_t>(ctx))
      .U32("llama.embedding_length", static_cast<uint32_t>(embd))
      .U32("llama.block_count", static_cast<uint32_t>(layers))
      .U32("llama.feed_forward_length", static_cast<uint32_t>(ff))
      .U32("llama.attention.head_count", static_cast<uint32_t>(heads))
      .U32("llama.attention.head_count_kv", static_cast<uint32_t>(kv_heads))
      .Strings("tokenizer.ggml.tokens", vocab);
  w.Tensor("token_embd.weight", type, {embd, vocab});
  for (uint64_t i = 0; i < layers; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    w.Tensor(b + "attn_norm.weight", GgufWriter::kF32, {embd})
        .Tensor(b + "attn_q.weight", type, {embd, embd})
        .Tensor(b + "attn_k.weight", type, {embd, kv_heads * head})
        .Tensor(b + "attn_v.weight", type, {embd, kv_heads * head})
        .Tensor(b + "attn_output.weight", type, {embd, embd})
        .Tensor(b + "ffn_norm.weight", GgufWriter::kF32, {embd})
        .Tensor(b + "ffn_gate.weight", type, {embd, ff})
        .Tensor(b + "ffn_up.weight", type, {embd, ff})
        .Tensor(b + "ffn_down.weight", type, {ff, embd});
  }
  w.Tensor("output_norm.weight", GgufWriter::kF32, {embd});
  w.Tensor("output.weight", type, {embd, vocab});
  return w;
}

}  // namespace berth::testing
