#include "core/untrusted_text.h"

#include <algorithm>
#include <cstdint>

namespace berth {
namespace {

void AppendEscaped(unsigned char c, std::string* out) {
  static const char kHex[] = "0123456789abcdef";
  *out += "\\x";
  out->push_back(kHex[c >> 4]);
  out->push_back(kHex[c & 0xf]);
}

// The length of the UTF-8 sequence at `s[i]` (1 for ASCII) and its code point; 0 when it is
// not one.
size_t Utf8At(std::string_view s, size_t i, uint32_t* cp) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = byte(i);
  if (c < 0x80) {
    *cp = c;
    return 1;
  }
  size_t len = c >= 0xc2 && c <= 0xdf   ? 2
               : c >= 0xe0 && c <= 0xef ? 3
               : c >= 0xf0 && c <= 0xf4 ? 4
                                        : 0;
  if (len == 0 || i + len > s.size()) return 0;
  uint32_t v = c & (len == 2 ? 0x1f : len == 3 ? 0x0f : 0x07);
  for (size_t k = 1; k < len; ++k) {
    if ((byte(i + k) & 0xc0) != 0x80) return 0;
    v = (v << 6) | (byte(i + k) & 0x3f);
  }
  // Overlong forms, surrogates and code points past U+10FFFF are not UTF-8.
  if ((len == 3 && v < 0x800) || (len == 4 && (v < 0x10000 || v > 0x10ffff)) ||
      (v >= 0xd800 && v <= 0xdfff))
    return 0;
  *cp = v;
  return len;
}

enum class Keep { kLines, kOneLine };

std::string Escape(std::string_view text, Keep keep) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if ((c >= 0x20 && c < 0x7f) || (keep == Keep::kLines && (c == '\n' || c == '\t'))) {
      out.push_back(static_cast<char>(c));
      ++i;
      continue;
    }
    uint32_t cp = 0;
    size_t len = Utf8At(text, i, &cp);
    // C0 and C1 controls, DEL, and the bidirectional overrides that make a line read other
    // than it is.
    bool hidden = cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || (cp >= 0x202a && cp <= 0x202e) ||
                  (cp >= 0x2066 && cp <= 0x2069);
    if (len == 0 || hidden) {
      for (size_t k = 0; k < std::max<size_t>(len, 1); ++k)
        AppendEscaped(static_cast<unsigned char>(text[i + k]), &out);
      i += std::max<size_t>(len, 1);
      continue;
    }
    out.append(text.substr(i, len));
    i += len;
  }
  return out;
}

bool Continuation(unsigned char c) { return (c & 0xc0) == 0x80; }

}  // namespace

bool IsUtf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    uint32_t cp = 0;
    size_t len = Utf8At(text, i, &cp);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

std::string_view Utf8Prefix(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  // Back off over at most three continuation bytes to the lead byte of the character the cut
  // falls in; keep it out only when it starts a character that the cut splits.
  size_t cut = max_bytes;
  size_t lead = cut;
  while (lead > 0 && cut - lead < 3 && Continuation(static_cast<unsigned char>(text[lead]))) --lead;
  uint32_t cp = 0;
  size_t len = Utf8At(text, lead, &cp);
  if (len > 0 && lead + len > cut) return text.substr(0, lead);
  return text.substr(0, cut);
}

std::string_view Utf8Suffix(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  size_t from = text.size() - max_bytes;
  // Skip the continuation bytes of a character that began before the cut.
  size_t lead = from;
  while (lead > 0 && from - lead < 3 && Continuation(static_cast<unsigned char>(text[lead])))
    --lead;
  uint32_t cp = 0;
  size_t len = lead < from ? Utf8At(text, lead, &cp) : 0;
  if (len > 0 && lead + len > from) return text.substr(lead + len);
  return text.substr(from);
}

std::string VisibleBytes(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    uint32_t cp = 0;
    size_t len = Utf8At(text, i, &cp);
    if (len == 0) {
      AppendEscaped(static_cast<unsigned char>(text[i]), &out);
      ++i;
      continue;
    }
    out.append(text.substr(i, len));
    i += len;
  }
  return out;
}

std::string EscapeControl(std::string_view text) { return Escape(text, Keep::kLines); }

std::string EscapeLine(std::string_view text) { return Escape(text, Keep::kOneLine); }

std::string Excerpt(std::string_view text, size_t max_bytes) {
  std::string_view cut = Utf8Prefix(text, max_bytes);
  return EscapeLine(cut) + (cut.size() < text.size() ? "..." : "");
}

}  // namespace berth
