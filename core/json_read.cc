#include "core/json_read.h"

#include <charconv>
#include <clocale>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>

namespace berth {
namespace {

constexpr int kMaxDepth = 512;

class FastJson {
 public:
  explicit FastJson(std::string_view text) : p_(text.data()), end_(text.data() + text.size()) {}

  std::optional<nlohmann::json> Read() {
    nlohmann::json j;
    if (!Value(&j)) return std::nullopt;
    Space();
    if (p_ != end_) return std::nullopt;
    return j;
  }

 private:
  void Space() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }

  bool Value(nlohmann::json* out) {
    Space();
    if (p_ == end_) return false;
    switch (*p_) {
      case '{':
        return Object(out);
      case '[':
        return Array(out);
      case '"': {
        std::string s;
        if (!String(&s)) return false;
        *out = std::move(s);
        return true;
      }
      case 't':
        return Literal("true", nlohmann::json(true), out);
      case 'f':
        return Literal("false", nlohmann::json(false), out);
      case 'n':
        return Literal("null", nlohmann::json(nullptr), out);
      default:
        return Number(out);
    }
  }

  bool Literal(std::string_view word, nlohmann::json value, nlohmann::json* out) {
    if (static_cast<size_t>(end_ - p_) < word.size() || std::string_view(p_, word.size()) != word)
      return false;
    p_ += word.size();
    *out = std::move(value);
    return true;
  }

  bool Object(nlohmann::json* out) {
    if (++depth_ > kMaxDepth) return false;
    ++p_;
    *out = nlohmann::json::object();
    auto& object = out->get_ref<nlohmann::json::object_t&>();
    Space();
    if (p_ < end_ && *p_ == '}') {
      ++p_;
      --depth_;
      return true;
    }
    while (true) {
      Space();
      if (p_ == end_ || *p_ != '"') return false;
      std::string key;
      if (!String(&key)) return false;
      Space();
      if (p_ == end_ || *p_ != ':') return false;
      ++p_;
      nlohmann::json value;
      if (!Value(&value)) return false;
      object[std::move(key)] = std::move(value);  // a repeated key: the last wins, as in nlohmann
      Space();
      if (p_ == end_) return false;
      if (*p_ == ',') {
        ++p_;
        continue;
      }
      if (*p_ != '}') return false;
      ++p_;
      --depth_;
      return true;
    }
  }

  bool Array(nlohmann::json* out) {
    if (++depth_ > kMaxDepth) return false;
    ++p_;
    *out = nlohmann::json::array();
    auto& array = out->get_ref<nlohmann::json::array_t&>();
    Space();
    if (p_ < end_ && *p_ == ']') {
      ++p_;
      --depth_;
      return true;
    }
    while (true) {
      array.emplace_back();
      if (!Value(&array.back())) return false;
      Space();
      if (p_ == end_) return false;
      if (*p_ == ',') {
        ++p_;
        continue;
      }
      if (*p_ != ']') return false;
      ++p_;
      --depth_;
      return true;
    }
  }

  static int Hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  // A string at p_ (its opening quote): ASCII, with the escapes JSON has for it.
  bool String(std::string* out) {
    ++p_;
    while (true) {
      const char* run = p_;
      while (p_ < end_) {
        auto c = static_cast<unsigned char>(*p_);
        if (c == '"' || c == '\\' || c < 0x20 || c >= 0x80) break;
        ++p_;
      }
      out->append(run, static_cast<size_t>(p_ - run));
      if (p_ == end_) return false;
      char c = *p_;
      if (c == '"') {
        ++p_;
        return true;
      }
      if (c != '\\') return false;  // a control character, or a byte outside ASCII: nlohmann's
      if (end_ - p_ < 2) return false;
      char e = p_[1];
      p_ += 2;
      switch (e) {
        case '"':
        case '\\':
        case '/':
          *out += e;
          break;
        case 'b':
          *out += '\b';
          break;
        case 'f':
          *out += '\f';
          break;
        case 'n':
          *out += '\n';
          break;
        case 'r':
          *out += '\r';
          break;
        case 't':
          *out += '\t';
          break;
        case 'u': {
          if (end_ - p_ < 4) return false;
          int code = 0;
          for (int i = 0; i < 4; ++i) {
            int h = Hex(p_[i]);
            if (h < 0) return false;
            code = code * 16 + h;
          }
          if (code >= 0x80) return false;
          *out += static_cast<char>(code);
          p_ += 4;
          break;
        }
        default:
          return false;
      }
    }
  }

  static bool Digit(char c) { return c >= '0' && c <= '9'; }

  // -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][-+]?[0-9]+)?, read as nlohmann reads it: a negative integer
  // as int64, another as uint64, a fraction or exponent as a double.
  bool Number(nlohmann::json* out) {
    const char* start = p_;
    bool negative = false;
    if (p_ < end_ && *p_ == '-') {
      negative = true;
      ++p_;
    }
    if (p_ == end_ || !Digit(*p_)) return false;
    if (*p_ == '0') {
      ++p_;
    } else {
      while (p_ < end_ && Digit(*p_)) ++p_;
    }
    bool integer = true;
    if (p_ < end_ && *p_ == '.') {
      integer = false;
      ++p_;
      if (p_ == end_ || !Digit(*p_)) return false;
      while (p_ < end_ && Digit(*p_)) ++p_;
    }
    if (p_ < end_ && (*p_ == 'e' || *p_ == 'E')) {
      integer = false;
      ++p_;
      if (p_ < end_ && (*p_ == '+' || *p_ == '-')) ++p_;
      if (p_ == end_ || !Digit(*p_)) return false;
      while (p_ < end_ && Digit(*p_)) ++p_;
    }
    if (integer && negative) {
      int64_t v = 0;
      auto [end, ec] = std::from_chars(start, p_, v);
      if (ec != std::errc() || end != p_) return false;  // beyond int64: nlohmann's double
      *out = v;
      return true;
    }
    if (integer) {
      uint64_t v = 0;
      auto [end, ec] = std::from_chars(start, p_, v);
      if (ec != std::errc() || end != p_) return false;
      *out = v;
      return true;
    }
    // strtod reads the locale's decimal point; nlohmann swaps it in, this reader leaves it.
    const lconv* locale = std::localeconv();
    if (locale->decimal_point == nullptr || std::string_view(locale->decimal_point) != ".")
      return false;
    std::string token(start, p_);
    char* end = nullptr;
    double v = std::strtod(token.c_str(), &end);
    if (end != token.c_str() + token.size() || !std::isfinite(v)) return false;
    *out = v;
    return true;
  }

  const char* p_;
  const char* end_;
  int depth_ = 0;
};

}  // namespace

std::optional<nlohmann::json> ReadJsonFast(std::string_view text) { return FastJson(text).Read(); }

}  // namespace berth
