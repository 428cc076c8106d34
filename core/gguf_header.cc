#include "core/gguf_header.h"

#include <cstring>

#include "core/untrusted_text.h"

namespace berth {
namespace {

// A reader of little-endian values that stops (ok() false) at the end of the prefix.
class Cursor {
 public:
  explicit Cursor(std::string_view data) : data_(data) {}
  bool ok() const { return ok_; }
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

// Skips a value of type `t`; false when the type is unknown (the rest cannot be read).
bool SkipValue(Cursor* c, uint32_t t) {
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
    if (count > kMaxGgufHeaderBytes) c->Skip(kMaxGgufHeaderBytes + 1);  // past any prefix
    c->Skip(count * n);
    return true;
  }
  if (element != 8) return false;  // arrays of arrays: not in llama.cpp's files
  for (uint64_t i = 0; i < count && c->ok(); ++i) c->String();
  return true;
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

}  // namespace berth
