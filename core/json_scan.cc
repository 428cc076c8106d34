#include "core/json_scan.h"

#include <algorithm>
#include <charconv>

namespace berth {
namespace {

class Scanner {
 public:
  Scanner(std::string_view text, JsonHandler& h)
      : p_(text.data()), end_(text.data() + text.size()), h_(h) {
    h_.SetCursor(&p_, text.data());
  }

  bool Run() {
    // The containers open: '{' or '['. Each state below continues the one on top.
    char stack[kMaxJsonDepth];
    size_t depth = 0;
    enum class Next { kValue, kKey, kAfterValue } next = Next::kValue;
    while (true) {
      SkipSpace();
      if (next == Next::kValue) {
        if (p_ == end_) return false;
        char c = *p_;
        if (c == '{' || c == '[') {
          ++p_;
          SkipSpace();
          bool object = c == '{';
          object ? h_.StartObject() : h_.StartArray();
          if (p_ < end_ && *p_ == (object ? '}' : ']')) {  // empty
            ++p_;
            object ? h_.EndObject() : h_.EndArray();
            next = Next::kAfterValue;
            continue;
          }
          if (depth == kMaxJsonDepth) return false;
          stack[depth++] = c;
          next = object ? Next::kKey : Next::kValue;
          continue;
        }
        if (!Scalar()) return false;
        next = Next::kAfterValue;
      } else if (next == Next::kKey) {
        if (p_ == end_ || *p_ != '"') return false;
        ++p_;
        std::string_view key;
        if (!String(&key)) return false;
        h_.Key(key);
        SkipSpace();
        if (p_ == end_ || *p_ != ':') return false;
        ++p_;
        next = Next::kValue;
      } else {  // after a value
        if (depth == 0) return p_ == end_;
        if (p_ == end_) return false;
        char top = stack[depth - 1];
        if (*p_ == ',') {
          ++p_;
          next = top == '{' ? Next::kKey : Next::kValue;
        } else if (*p_ == (top == '{' ? '}' : ']')) {
          ++p_;
          --depth;
          top == '{' ? h_.EndObject() : h_.EndArray();
        } else {
          return false;
        }
      }
    }
  }

 private:
  void SkipSpace() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }

  bool Literal(std::string_view word) {
    if (static_cast<size_t>(end_ - p_) < word.size() || std::string_view(p_, word.size()) != word)
      return false;
    p_ += word.size();
    return true;
  }

  bool Scalar() {
    switch (*p_) {
      case '"': {
        ++p_;
        std::string_view s;
        if (!String(&s)) return false;
        h_.String(s);
        return true;
      }
      case 't':
        if (!Literal("true")) return false;
        h_.Boolean(true);
        return true;
      case 'f':
        if (!Literal("false")) return false;
        h_.Boolean(false);
        return true;
      case 'n':
        if (!Literal("null")) return false;
        h_.Null();
        return true;
      default:
        return Number();
    }
  }

  static bool Digit(char c) { return c >= '0' && c <= '9'; }

  /// -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
  bool Number() {
    const char* start = p_;
    bool negative = false;
    if (*p_ == '-') {
      negative = true;
      ++p_;
    }
    if (p_ == end_ || !Digit(*p_)) return false;
    uint64_t v = 0;
    bool overflow = false;
    // The decimal exponent of the first significant digit, roughly: + for each integer digit
    // (after leading zeros), - for each zero that opens a fraction of "0.".
    long magnitude = 0;
    if (*p_ == '0') {
      ++p_;
    } else {
      while (p_ < end_ && Digit(*p_)) {
        uint64_t d = static_cast<uint64_t>(*p_ - '0');
        if (v > (UINT64_MAX - d) / 10) overflow = true;
        v = v * 10 + d;
        ++magnitude;
        ++p_;
      }
    }
    bool integer = true;
    if (p_ < end_ && *p_ == '.') {
      ++p_;
      if (p_ == end_ || !Digit(*p_)) return false;
      bool leading = magnitude == 0;
      while (p_ < end_ && Digit(*p_)) {
        if (leading && *p_ == '0') --magnitude;
        leading = leading && *p_ == '0';
        ++p_;
      }
      integer = false;
    }
    if (p_ < end_ && (*p_ == 'e' || *p_ == 'E')) {
      ++p_;
      bool minus = false;
      if (p_ < end_ && (*p_ == '+' || *p_ == '-')) minus = *p_++ == '-';
      if (p_ == end_ || !Digit(*p_)) return false;
      long exponent = 0;
      while (p_ < end_ && Digit(*p_)) {
        exponent = std::min(exponent * 10 + (*p_ - '0'), 1000000L);
        ++p_;
      }
      magnitude += minus ? -exponent : exponent;
      integer = false;
    }
    if (integer && !overflow) {
      if (!negative) {
        h_.Unsigned(v);
        return true;
      }
      if (v <= static_cast<uint64_t>(INT64_MAX) + 1) {
        h_.Signed(v == static_cast<uint64_t>(INT64_MAX) + 1 ? INT64_MIN : -static_cast<int64_t>(v));
        return true;
      }
    }
    // A double, as nlohmann-json reads it: one too large for a double is refused (it underflows
    // to 0 when too small, and is accepted).
    double d = 0;
    auto [end, ec] = std::from_chars(start, p_, d);
    if (end != p_) return false;
    if (ec == std::errc::result_out_of_range && magnitude > 0) return false;
    if (ec == std::errc::result_out_of_range) d = negative ? -0.0 : 0.0;  // underflow, as strtod
    h_.Float(d);
    return true;
  }

  static int Hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  /// Four hex digits after "\u"; -1 when they are not.
  int32_t Hex4() {
    if (end_ - p_ < 4) return -1;
    int32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      int h = Hex(p_[i]);
      if (h < 0) return -1;
      v = v * 16 + h;
    }
    p_ += 4;
    return v;
  }

  /// The length of the valid UTF-8 sequence at p_ (its first byte >= 0x80), or 0 (RFC 3629).
  size_t Utf8Length() const {
    auto b = [this](ptrdiff_t i) { return static_cast<unsigned char>(p_[i]); };
    auto cont = [&](ptrdiff_t i, unsigned char lo = 0x80, unsigned char hi = 0xBF) {
      return p_ + i < end_ && b(i) >= lo && b(i) <= hi;
    };
    unsigned char c = b(0);
    if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 1 + 1 : 0;
    if (c == 0xE0) return cont(1, 0xA0) && cont(2) ? 3 : 0;
    if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) return cont(1) && cont(2) ? 3 : 0;
    if (c == 0xED) return cont(1, 0x80, 0x9F) && cont(2) ? 3 : 0;
    if (c == 0xF0) return cont(1, 0x90) && cont(2) && cont(3) ? 4 : 0;
    if (c >= 0xF1 && c <= 0xF3) return cont(1) && cont(2) && cont(3) ? 4 : 0;
    if (c == 0xF4) return cont(1, 0x80, 0x8F) && cont(2) && cont(3) ? 4 : 0;
    return 0;
  }

  void AppendUtf8(uint32_t cp) {
    if (cp < 0x80) {
      buf_ += static_cast<char>(cp);
    } else if (cp < 0x800) {
      buf_ += static_cast<char>(0xC0 | (cp >> 6));
      buf_ += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      buf_ += static_cast<char>(0xE0 | (cp >> 12));
      buf_ += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      buf_ += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      buf_ += static_cast<char>(0xF0 | (cp >> 18));
      buf_ += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      buf_ += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      buf_ += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  /// A string's body after its opening quote, through its closing one. `out` is the decoded
  /// text: a view of the input when it has no escapes, else of buf_.
  bool String(std::string_view* out) {
    const char* start = p_;
    bool escaped = false;
    while (true) {
      // The common run: printable ASCII.
      const char* run = p_;
      while (p_ < end_ && static_cast<unsigned char>(*p_) >= 0x20 &&
             static_cast<unsigned char>(*p_) < 0x80 && *p_ != '"' && *p_ != '\\')
        ++p_;
      if (escaped) buf_.append(run, static_cast<size_t>(p_ - run));
      if (p_ == end_) return false;
      unsigned char c = static_cast<unsigned char>(*p_);
      if (c == '"') {
        if (escaped) {
          *out = buf_;
        } else {
          *out = std::string_view(start, static_cast<size_t>(p_ - start));
        }
        ++p_;
        return true;
      }
      if (c < 0x20) return false;  // a control character must be escaped
      if (c >= 0x80) {
        size_t n = Utf8Length();
        if (n == 0) return false;
        if (escaped) buf_.append(p_, n);
        p_ += n;
        continue;
      }
      // A backslash: from here on the text is decoded into buf_.
      if (!escaped) {
        escaped = true;
        buf_.assign(start, static_cast<size_t>(p_ - start));
      }
      ++p_;
      if (p_ == end_) return false;
      char e = *p_++;
      switch (e) {
        case '"':
          buf_ += '"';
          break;
        case '\\':
          buf_ += '\\';
          break;
        case '/':
          buf_ += '/';
          break;
        case 'b':
          buf_ += '\b';
          break;
        case 'f':
          buf_ += '\f';
          break;
        case 'n':
          buf_ += '\n';
          break;
        case 'r':
          buf_ += '\r';
          break;
        case 't':
          buf_ += '\t';
          break;
        case 'u': {
          int32_t cp = Hex4();
          if (cp < 0) return false;
          if (cp >= 0xDC00 && cp <= 0xDFFF) return false;  // a low surrogate alone
          if (cp >= 0xD800 && cp <= 0xDBFF) {              // must pair with a low one
            if (end_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u') return false;
            p_ += 2;
            int32_t low = Hex4();
            if (low < 0xDC00 || low > 0xDFFF) return false;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          }
          AppendUtf8(static_cast<uint32_t>(cp));
          break;
        }
        default:
          return false;
      }
    }
  }

  const char* p_;
  const char* end_;
  JsonHandler& h_;
  std::string buf_;  // a decoded string with escapes
};

}  // namespace

bool JsonNestedDeeperThan(std::string_view text, size_t limit) {
  size_t depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return true;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return false;
}

bool ScanJson(std::string_view text, JsonHandler& h) { return Scanner(text, h).Run(); }

}  // namespace berth
