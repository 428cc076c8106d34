#include "core/gguf_header.h"

#include <cstring>
#include <map>
#include <optional>

#include "core/untrusted_text.h"

namespace berth {
namespace {

// A reader of little-endian values that stops (ok() false) at the end of the prefix.
class Cursor {
 public:
  explicit Cursor(std::string_view data) : data_(data) {}
  bool ok() const { return ok_; }
  size_t left() const { return data_.size() - at_; }
  uint64_t U(size_t bytes) {
    if (!ok_ || data_.size() - at_ < bytes) {
      ok_ = false;
      return 0;
    }
    uint64_t v = 0;
    for (size_t i = 0; i < bytes; ++i)
      v |= uint64_t{static_cast<unsigned char>(data_[at_ + i])} << (8 * i);
    at_ += bytes;
    return v;
  }
  std::string_view String() {
    uint64_t n = U(8);
    if (!ok_ || n > data_.size() - at_) {
      ok_ = false;
      return {};
    }
    std::string_view s = data_.substr(at_, n);
    at_ += n;
    return s;
  }
  void Skip(uint64_t n) {
    if (!ok_ || n > data_.size() - at_)
      ok_ = false;
    else
      at_ += n;
  }

 private:
  std::string_view data_;
  size_t at_ = 0;
  bool ok_ = true;
};

// The size of a scalar of GGUF type `t`; 0 for a string, an array or an unknown type.
size_t ScalarSize(uint32_t t) {
  switch (t) {
    case 0:  // uint8
    case 1:  // int8
    case 7:  // bool
      return 1;
    case 2:  // uint16
    case 3:  // int16
      return 2;
    case 4:  // uint32
    case 5:  // int32
    case 6:  // float32
      return 4;
    case 10:  // uint64
    case 11:  // int64
    case 12:  // float64
      return 8;
    default:
      return 0;
  }
}

// Skips a value of type `t` (arrays of arrays at most `depth` deep); false when the type is
// unknown (the rest cannot be read).
bool SkipValue(Cursor* c, uint32_t t, int depth = 2) {
  if (size_t n = ScalarSize(t)) {
    c->Skip(n);
    return true;
  }
  if (t == 8) {
    c->String();
    return true;
  }
  if (t != 9) return false;
  uint32_t element = static_cast<uint32_t>(c->U(4));
  uint64_t count = c->U(8);
  if (size_t n = ScalarSize(element)) {
    if (count > c->left()) c->Skip(c->left() + 1);  // past any prefix, without overflow
    c->Skip(count * n);
    return true;
  }
  if (element == 8) {
    for (uint64_t i = 0; i < count && c->ok(); ++i) c->String();
    return true;
  }
  // Arrays of arrays: the format allows them, llama.cpp writes none; each takes 12 bytes at
  // least, so a hostile count ends at the end of the prefix.
  if (element != 9 || depth == 0) return false;
  for (uint64_t i = 0; i < count && c->ok(); ++i)
    if (!SkipValue(c, 9, depth - 1)) return false;
  return true;
}

// Whether GGUF type `t` is an integer (not a float, a bool, a string or an array).
bool IsInteger(uint32_t t) { return ScalarSize(t) != 0 && t != 6 && t != 7 && t != 12; }

// An integer of GGUF type `t` (IsInteger), read; nullopt for a negative one.
std::optional<uint64_t> ReadUnsigned(Cursor* c, uint32_t t) {
  size_t n = ScalarSize(t);
  uint64_t v = c->U(n);
  const bool is_signed = t == 1 || t == 3 || t == 5 || t == 11;
  if (is_signed && n < 8 && (v >> (8 * n - 1)) & 1) return std::nullopt;
  if (is_signed && n == 8 && (v >> 63)) return std::nullopt;
  return v;
}

}  // namespace

GgufHeader ParseGgufHeader(std::string_view prefix) {
  GgufHeader h;
  if (prefix.substr(0, 4) != "GGUF") {
    h.problem = "is not a GGUF file (it starts with '" +
                EscapeLine(prefix.substr(0, std::min<size_t>(prefix.size(), 4))) + "', not 'GGUF')";
    return h;
  }
  Cursor c(prefix.substr(4));
  h.version = static_cast<uint32_t>(c.U(4));
  if (!c.ok()) {
    h.problem = "is cut short: it ends before its version";
    return h;
  }
  if (h.version != 2 && h.version != 3) {
    h.problem = h.version == 1 ? "is GGUF version 1, which llama.cpp no longer reads"
                               : "says it is GGUF version " + std::to_string(h.version) +
                                     " (llama.cpp reads versions 2 and 3)";
    return h;
  }
  c.U(8);  // tensor count
  uint64_t kv = c.U(8);
  if (!c.ok()) {
    h.problem = "is cut short: its header ends before its metadata count";
    return h;
  }
  for (uint64_t i = 0; i < kv && c.ok(); ++i) {
    std::string_view key = c.String();
    uint32_t type = static_cast<uint32_t>(c.U(4));
    if (!c.ok()) break;
    if (key == "general.architecture" && type == 8) {
      std::string_view v = c.String();
      if (c.ok()) h.architecture = EscapeLine(Utf8Prefix(v, 64));
      break;
    }
    if (!SkipValue(&c, type)) break;
  }
  return h;
}

namespace {

// One ggml type: values per block and bytes per block (ggml/src/ggml-common.h's block_*
// structs; QK_K = 256).
struct GgmlType {
  uint32_t id;
  uint32_t block;
  uint32_t bytes;
};
constexpr GgmlType kGgmlTypes[] = {
    {0, 1, 4},       // F32
    {1, 1, 2},       // F16
    {2, 32, 18},     // Q4_0
    {3, 32, 20},     // Q4_1
    {6, 32, 22},     // Q5_0
    {7, 32, 24},     // Q5_1
    {8, 32, 34},     // Q8_0
    {9, 32, 36},     // Q8_1
    {10, 256, 84},   // Q2_K
    {11, 256, 110},  // Q3_K
    {12, 256, 144},  // Q4_K
    {13, 256, 176},  // Q5_K
    {14, 256, 210},  // Q6_K
    {15, 256, 292},  // Q8_K
    {16, 256, 66},   // IQ2_XXS
    {17, 256, 74},   // IQ2_XS
    {18, 256, 98},   // IQ3_XXS
    {19, 256, 50},   // IQ1_S
    {20, 32, 18},    // IQ4_NL
    {21, 256, 110},  // IQ3_S
    {22, 256, 82},   // IQ2_S
    {23, 256, 136},  // IQ4_XS
    {24, 1, 1},      // I8
    {25, 1, 2},      // I16
    {26, 1, 4},      // I32
    {27, 1, 8},      // I64
    {28, 1, 8},      // F64
    {29, 256, 56},   // IQ1_M
    {30, 1, 2},      // BF16
    {34, 256, 54},   // TQ1_0
    {35, 256, 66},   // TQ2_0
    {39, 32, 17},    // MXFP4
    {40, 64, 36},    // NVFP4
    {41, 128, 18},   // Q1_0
    {42, 64, 18},    // Q2_0
};

// The block index N of a tensor named "blk.N.<rest>"; nullopt for any other name.
std::optional<uint64_t> BlockOf(std::string_view name) {
  constexpr std::string_view kBlk = "blk.";
  if (name.substr(0, kBlk.size()) != kBlk) return std::nullopt;
  uint64_t n = 0;
  size_t i = kBlk.size();
  for (; i < name.size() && i < kBlk.size() + 6 && name[i] >= '0' && name[i] <= '9'; ++i)
    n = n * 10 + static_cast<uint64_t>(name[i] - '0');
  if (i == kBlk.size() || i >= name.size() || name[i] != '.') return std::nullopt;
  return n;
}

bool IsInputTensor(std::string_view name) {
  for (std::string_view p : {"token_embd.", "token_types.", "position_embd."})
    if (name.substr(0, p.size()) == p) return true;
  return false;
}

// The model keys berth reads, as suffixes of "<arch>.".
enum class Key {
  kNone,
  kBlocks,
  kContext,
  kEmbedding,
  kHeads,
  kHeadsKv,
  kKeyLength,
  kValueLength,
  kVocab
};
Key KeyOf(std::string_view suffix) {
  static const std::map<std::string_view, Key> keys = {
      {"block_count", Key::kBlocks},
      {"context_length", Key::kContext},
      {"embedding_length", Key::kEmbedding},
      {"attention.head_count", Key::kHeads},
      {"attention.head_count_kv", Key::kHeadsKv},
      {"attention.key_length", Key::kKeyLength},
      {"attention.value_length", Key::kValueLength},
      {"vocab_size", Key::kVocab},
  };
  auto it = keys.find(suffix);
  return it == keys.end() ? Key::kNone : it->second;
}

}  // namespace

std::optional<uint64_t> GgmlBytes(uint32_t type, uint64_t elements) {
  for (const GgmlType& t : kGgmlTypes) {
    if (t.id != type) continue;
    if (elements % t.block != 0) return std::nullopt;
    uint64_t blocks = elements / t.block;
    uint64_t bytes = 0;
    if (__builtin_mul_overflow(blocks, uint64_t{t.bytes}, &bytes)) return std::nullopt;
    return bytes;
  }
  return std::nullopt;
}

uint64_t GgufModel::TensorBytes() const {
  uint64_t total = input_bytes + output_bytes;
  for (uint64_t b : block_bytes) total += b;
  return total;
}

uint64_t GgufModel::HeadsKv(uint64_t il) const {
  if (head_count_kv.empty()) return head_count;
  if (head_count_kv.size() == 1) return head_count_kv[0];
  return il < head_count_kv.size() ? head_count_kv[il] : 0;
}

uint64_t GgufModel::KeyLength() const {
  if (key_length) return key_length;
  return head_count ? embedding_length / head_count : 0;
}

uint64_t GgufModel::ValueLength() const {
  if (value_length) return value_length;
  return head_count ? embedding_length / head_count : 0;
}

namespace {

// The model keys of the metadata ("<arch>.block_count", ...: Key) into `m`, and the
// architecture and the tokenizer's size; the problem that stops the read, "" when none. The
// architecture usually comes first, but nothing says so: what each suffix said of which prefix
// is kept (the first 16 prefixes), and the architecture's picked after.
std::string ReadModelKeys(Cursor* c, uint64_t kvs, size_t read, GgufModel* m) {
  struct Said {
    std::map<Key, uint64_t> values;
    std::vector<uint64_t> heads_kv;
  };
  std::map<std::string, Said, std::less<>> said;
  uint64_t tokens = 0;
  uint32_t stuck = 0;  // the type of a value berth cannot step over (the rest is unreadable)
  for (uint64_t i = 0; i < kvs && !stuck; ++i) {
    std::string_view key = c->String();
    uint32_t type = static_cast<uint32_t>(c->U(4));
    if (!c->ok()) break;
    if (key == "general.architecture" && type == 8) {
      m->architecture = EscapeLine(Utf8Prefix(c->String(), 64));
      continue;
    }
    if (key == "tokenizer.ggml.tokens" && type == 9) {
      uint32_t element = static_cast<uint32_t>(c->U(4));
      tokens = c->U(8);
      if (element != 8) stuck = type;
      for (uint64_t k = 0; k < tokens && c->ok() && !stuck; ++k) c->String();
      continue;
    }
    size_t dot = key.find('.');
    Key k = dot == std::string_view::npos ? Key::kNone : KeyOf(key.substr(dot + 1));
    if (k == Key::kNone || (said.size() >= 16 && !said.count(key.substr(0, dot)))) {
      if (!SkipValue(c, type)) stuck = type;
      continue;
    }
    Said& s = said[std::string(key.substr(0, dot))];
    if (k == Key::kHeadsKv && type == 9) {  // one per layer
      uint32_t element = static_cast<uint32_t>(c->U(4));
      uint64_t count = c->U(8);
      if (!IsInteger(element)) {
        stuck = type;
        continue;
      }
      if (count > kMaxGgufBlocks)
        return "lists " + std::to_string(count) + " layers in its head_count_kv";
      s.heads_kv.clear();
      for (uint64_t n = 0; n < count && c->ok(); ++n)
        s.heads_kv.push_back(ReadUnsigned(c, element).value_or(0));
      continue;
    }
    if (IsInteger(type)) {
      uint64_t v = ReadUnsigned(c, type).value_or(0);  // a negative count: none
      s.values[k] = v;
      if (k == Key::kHeadsKv) s.heads_kv = {v};
    } else if (!SkipValue(c, type)) {
      stuck = type;
    }
  }
  if (stuck)
    return "has a metadata value of a type berth cannot read past (" + std::to_string(stuck) + ")";
  if (!c->ok())
    return "is cut short: its metadata is longer than the " + std::to_string(read) + " bytes read";
  if (m->architecture.empty()) return "has no general.architecture";
  auto mine = said.find(m->architecture);
  if (mine != said.end()) {
    auto get = [&](Key k) {
      auto it = mine->second.values.find(k);
      return it == mine->second.values.end() ? uint64_t{0} : it->second;
    };
    m->block_count = get(Key::kBlocks);
    m->context_length = get(Key::kContext);
    m->embedding_length = get(Key::kEmbedding);
    m->head_count = get(Key::kHeads);
    m->head_count_kv = mine->second.heads_kv;
    m->key_length = get(Key::kKeyLength);
    m->value_length = get(Key::kValueLength);
    m->vocab_size = tokens ? tokens : get(Key::kVocab);
  }
  return "";
}

// The bytes of each tensor of the list into `m`'s input, block and output sums; the problem
// that stops the read, "" when none.
std::string ReadTensorList(Cursor* c, uint64_t tensors, size_t read, GgufModel* m) {
  m->block_bytes.assign(m->block_count, 0);
  uint64_t total = 0;
  for (uint64_t i = 0; i < tensors; ++i) {
    std::string_view name = c->String();
    uint32_t dims = static_cast<uint32_t>(c->U(4));
    if (!c->ok()) break;
    // Appended, not "'" + ... + "'": g++ 12 -O2 with _FORTIFY_SOURCE warns falsely on the
    // temporary (-Wrestrict/-Wstringop-overflow, GCC bug 105329), which fails the package build.
    std::string shown = "'";
    shown += EscapeLine(Utf8Prefix(name, 64));
    shown += "'";
    if (dims == 0 || dims > 4)  // GGML_MAX_DIMS
      return "has a tensor " + shown + " of " + std::to_string(dims) + " dimensions";
    uint64_t elements = 1;
    bool overflow = false;
    for (uint32_t d = 0; d < dims; ++d)
      overflow = __builtin_mul_overflow(elements, c->U(8), &elements) || overflow;
    uint32_t type = static_cast<uint32_t>(c->U(4));
    c->U(8);  // offset
    if (!c->ok()) break;
    std::optional<uint64_t> bytes = overflow ? std::nullopt : GgmlBytes(type, elements);
    if (!bytes)
      return "has a tensor " + shown + " of ggml type " + std::to_string(type) +
             (overflow || GgmlBytes(type, 0) ? " and a shape berth cannot size"
                                             : ", which berth does not know") +
             ": its weights are unknown";
    if (__builtin_add_overflow(total, *bytes, &total))
      return "has tensors that add up to more than 2^64 bytes";
    if (std::optional<uint64_t> blk = BlockOf(name); blk && *blk < m->block_count)
      m->block_bytes[*blk] += *bytes;
    else if (IsInputTensor(name))
      m->input_bytes += *bytes;
    else
      m->output_bytes += *bytes;
  }
  if (!c->ok())
    return "is cut short: its tensor list ends past the " + std::to_string(read) + " bytes read";
  return "";
}

}  // namespace

GgufModel ParseGgufModel(std::string_view prefix) {
  GgufModel m;
  Cursor c(prefix);
  const bool gguf = c.U(4) == 0x46554747;  // "GGUF"
  const uint64_t version = c.U(4);
  const uint64_t tensors = c.U(8);
  const uint64_t kvs = c.U(8);
  if (!c.ok() || !gguf || (version != 2 && version != 3)) {
    m.problem = ParseGgufHeader(prefix.substr(0, 24)).problem;
    if (m.problem.empty()) m.problem = "is cut short: it ends before its metadata";
    return m;
  }
  m.problem = ReadModelKeys(&c, kvs, prefix.size(), &m);
  if (!m.problem.empty()) return m;
  if (m.block_count == 0 || m.block_count > kMaxGgufBlocks) {
    m.problem = "says " + m.architecture + ".block_count is " + std::to_string(m.block_count) +
                " (berth reads 1 to " + std::to_string(kMaxGgufBlocks) + ")";
    return m;
  }
  if (m.head_count_kv.size() > 1 && m.head_count_kv.size() != m.block_count) {
    m.problem = "lists " + std::to_string(m.head_count_kv.size()) +
                " layers in its head_count_kv, of " + std::to_string(m.block_count);
    return m;
  }
  m.problem = ReadTensorList(&c, tensors, prefix.size(), &m);
  return m;
}

}  // namespace berth
