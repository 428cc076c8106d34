// libFuzzer target for the GGUF reader (core/gguf_header.h): a model file's head is the Hub's,
// untrusted. Beyond "no crash, no sanitizer report", it checks the promises the planner relies
// on: figures without a problem hold one block_bytes entry per block (at most kMaxGgufBlocks),
// their head_count_kv is one value or one per block, and the bytes add up without wrapping.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/gguf_header.h"

namespace {

void Check(bool condition) {
  if (!condition) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view file(reinterpret_cast<const char*>(data), size);
  berth::ParseGgufHeader(file);
  berth::GgufModel m = berth::ParseGgufModel(file);
  if (!m.problem.empty()) return 0;
  Check(m.block_count >= 1 && m.block_count <= berth::kMaxGgufBlocks);
  Check(m.block_bytes.size() == m.block_count);
  Check(m.head_count_kv.size() <= 1 || m.head_count_kv.size() == m.block_count);
  uint64_t sum = m.input_bytes;
  Check(!__builtin_add_overflow(sum, m.output_bytes, &sum));
  for (uint64_t b : m.block_bytes) Check(!__builtin_add_overflow(sum, b, &sum));
  Check(sum == m.TensorBytes());
  return 0;
}
