// The GGUF model reader (core/gguf_header.h ParseGgufModel): the figures a llama-server's GPU
// claim is derived from, read from an untrusted file's head without throwing, reading past it
// or allocating what a hostile count asks for.
#include <gtest/gtest.h>

#include "core/gguf_header.h"
#include "tests/support/gguf_writer.h"

namespace berth {
namespace {

using testing::GgufWriter;
using testing::LlamaShaped;

TEST(GgufModel, ReadsALlamaShapedFilesFiguresAndTensorBytes) {
  std::string file = LlamaShaped(256, 4, 512, 4, 2, 32000, 2048, GgufWriter::kF32).Bytes();
  GgufModel m = ParseGgufModel(file);
  EXPECT_EQ(m.problem, "");
  EXPECT_EQ(m.architecture, "llama");
  EXPECT_EQ(m.block_count, 4u);
  EXPECT_EQ(m.context_length, 2048u);
  EXPECT_EQ(m.embedding_length, 256u);
  EXPECT_EQ(m.head_count, 4u);
  EXPECT_EQ(m.HeadsKv(3), 2u);
  EXPECT_EQ(m.KeyLength(), 64u);
  EXPECT_EQ(m.vocab_size, 32000u);
  EXPECT_EQ(m.input_bytes, 256u * 32000 * 4);
  EXPECT_EQ(m.output_bytes, 256u * 32000 * 4 + 256 * 4);
  ASSERT_EQ(m.block_bytes.size(), 4u);
  // q, o: 256²; k, v: 256 × 128; gate, up, down: 256 × 512; two norms of 256; F32.
  EXPECT_EQ(m.block_bytes[0], (2 * 256 * 256 + 2 * 256 * 128 + 3 * 256 * 512 + 2 * 256) * 4u);
}

TEST(GgufModel, SizesQuantizedTypesByTheirBlocks) {
  EXPECT_EQ(GgmlBytes(0, 10), 40u);                   // F32
  EXPECT_EQ(GgmlBytes(30, 10), 20u);                  // BF16
  EXPECT_EQ(GgmlBytes(8, 64), 68u);                   // Q8_0: 34 bytes per 32
  EXPECT_EQ(GgmlBytes(12, 512), 288u);                // Q4_K: 144 per 256
  EXPECT_EQ(GgmlBytes(14, 256), 210u);                // Q6_K
  EXPECT_EQ(GgmlBytes(23, 256), 136u);                // IQ4_XS
  EXPECT_EQ(GgmlBytes(12, 100), std::nullopt);        // not whole blocks
  EXPECT_EQ(GgmlBytes(4, 32), std::nullopt);          // Q4_2: removed from ggml
  EXPECT_EQ(GgmlBytes(0, UINT64_MAX), std::nullopt);  // overflows
  GgufModel m =
      ParseGgufModel(LlamaShaped(256, 2, 512, 4, 2, 256, 2048, GgufWriter::kQ4_K).Bytes());
  EXPECT_EQ(m.problem, "");
  EXPECT_EQ(m.input_bytes, 256u * 256 / 256 * 144);
}

TEST(GgufModel, KeysOfTheArchitectureCountWhereverTheyComeAndPerLayerKvHeads) {
  GgufWriter w;
  w.U32("llama.block_count", 99)  // another architecture's keys are not this one's
      .U32("qwen3.block_count", 2)
      .U32s("qwen3.attention.head_count_kv", {8, 2})
      .U32("qwen3.attention.head_count", 16)
      .U32("qwen3.attention.key_length", 128)
      .Str("general.architecture", "qwen3")
      .U32("qwen3.vocab_size", 1000);
  w.Tensor("blk.1.attn_q.weight", GgufWriter::kF16, {128, 128});
  GgufModel m = ParseGgufModel(w.Bytes());
  EXPECT_EQ(m.problem, "");
  EXPECT_EQ(m.block_count, 2u);
  EXPECT_EQ(m.HeadsKv(0), 8u);
  EXPECT_EQ(m.HeadsKv(1), 2u);
  EXPECT_EQ(m.KeyLength(), 128u);
  EXPECT_EQ(m.vocab_size, 1000u);
  EXPECT_EQ(m.block_bytes, (std::vector<uint64_t>{0, 128 * 128 * 2}));
}

TEST(GgufModel, AnUnknownTensorTypeLeavesTheWeightsUnknownAndSaysSo) {
  GgufWriter w = LlamaShaped(64, 1, 128, 4, 2, 32, 512, GgufWriter::kF16);
  w.Tensor("blk.0.exotic.weight", 77, {64});
  GgufModel m = ParseGgufModel(w.Bytes());
  EXPECT_EQ(m.problem,
            "has a tensor 'blk.0.exotic.weight' of ggml type 77, which berth does not know: its "
            "weights are unknown");
}

TEST(GgufModel, EveryPrefixOfAFileIsCutShortNeverACrash) {
  std::string file = LlamaShaped(64, 2, 128, 4, 2, 64, 512, GgufWriter::kF16).Bytes();
  for (size_t n = 0; n < file.size(); ++n) {
    GgufModel m = ParseGgufModel(std::string_view(file).substr(0, n));
    EXPECT_NE(m.problem, "") << n;
  }
  EXPECT_EQ(ParseGgufModel(file).problem, "");
  EXPECT_EQ(ParseGgufModel(file.substr(0, 100)).problem,
            "is cut short: its metadata is longer than the 100 bytes read");
}

TEST(GgufModel, HostileCountsAndLengthsEndAtTheBufferWithoutAllocating) {
  auto base = [] {
    GgufWriter w;
    w.Str("general.architecture", "llama").U32("llama.block_count", 2);
    return w;
  };
  std::string huge_len;  // a key of 2^63 bytes
  GgufWriter::Put(&huge_len, uint64_t{1} << 63, 8);
  EXPECT_NE(ParseGgufModel(base().Raw(huge_len).Bytes()).problem, "");
  // An array of 2^60 uint32 values, and one of 2^60 strings.
  std::string arr;
  GgufWriter::String(&arr, "k");
  GgufWriter::Put(&arr, GgufWriter::kArray, 4);
  GgufWriter::Put(&arr, GgufWriter::kU32, 4);
  GgufWriter::Put(&arr, uint64_t{1} << 60, 8);
  EXPECT_NE(ParseGgufModel(base().Raw(arr).Bytes()).problem, "");
  // Arrays of arrays of arrays, nested past what berth follows.
  std::string nest;
  GgufWriter::String(&nest, "k");
  GgufWriter::Put(&nest, GgufWriter::kArray, 4);
  for (int i = 0; i < 8; ++i) {
    GgufWriter::Put(&nest, GgufWriter::kArray, 4);
    GgufWriter::Put(&nest, 1, 8);
  }
  EXPECT_NE(ParseGgufModel(base().Raw(nest).Bytes()).problem, "");
  // head_count_kv of 2^40 layers: refused, not materialised.
  GgufWriter many = base();
  std::string kv;
  GgufWriter::String(&kv, "llama.attention.head_count_kv");
  GgufWriter::Put(&kv, GgufWriter::kArray, 4);
  GgufWriter::Put(&kv, GgufWriter::kU32, 4);
  GgufWriter::Put(&kv, uint64_t{1} << 40, 8);
  EXPECT_EQ(ParseGgufModel(many.Raw(kv).Bytes()).problem,
            "lists 1099511627776 layers in its head_count_kv");
  // 2^62 tensors declared, two written: the list is cut short.
  GgufWriter t = base();
  t.Tensor("blk.0.a", GgufWriter::kF32, {4});
  EXPECT_EQ(ParseGgufModel(t.Bytes(3, int64_t{1} << 62)).problem.substr(0, 12), "is cut short");
  // A block count of 2^32, dimensions that overflow, five dimensions.
  GgufWriter blocks;
  blocks.Str("general.architecture", "llama").U32("llama.block_count", 0xffffffff);
  EXPECT_EQ(ParseGgufModel(blocks.Bytes()).problem,
            "says llama.block_count is 4294967295 (berth reads 1 to 4096)");
  GgufWriter big = base();
  big.Tensor("blk.0.a", GgufWriter::kF32, {uint64_t{1} << 40, uint64_t{1} << 40});
  EXPECT_EQ(ParseGgufModel(big.Bytes()).problem,
            "has a tensor 'blk.0.a' of ggml type 0 and a shape berth cannot size: its weights are "
            "unknown");
  GgufWriter five = base();
  five.Tensor("blk.0.a", GgufWriter::kF32, {1, 1, 1, 1, 1});
  EXPECT_EQ(ParseGgufModel(five.Bytes()).problem, "has a tensor 'blk.0.a' of 5 dimensions");
}

TEST(GgufModel, NotGgufOrAnOldVersionSaysWhatTheHeaderSays) {
  EXPECT_EQ(ParseGgufModel("PK\x03\x04 not a model").problem,
            "is not a GGUF file (it starts with 'PK\\x03\\x04', not 'GGUF')");
  EXPECT_EQ(ParseGgufModel(GgufWriter().Bytes(1)).problem,
            "is GGUF version 1, which llama.cpp no longer reads");
  EXPECT_EQ(ParseGgufModel(GgufWriter().Bytes()).problem, "has no general.architecture");
}

}  // namespace
}  // namespace berth
