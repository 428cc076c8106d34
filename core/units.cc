#include "core/units.h"

#include <cctype>
#include <cmath>
#include <cstdio>

namespace berth {
namespace {

std::optional<double> ParseNumber(std::string_view s, size_t* used) {
  size_t i = 0;
  bool digits = false, dot = false;
  while (i < s.size() &&
         (std::isdigit(static_cast<unsigned char>(s[i])) || (s[i] == '.' && !dot))) {
    if (s[i] == '.')
      dot = true;
    else
      digits = true;
    ++i;
  }
  if (!digits) return std::nullopt;
  *used = i;
  return std::strtod(std::string(s.substr(0, i)).c_str(), nullptr);
}

std::string Trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

// The size `text` stands for, unbounded; nullopt if malformed.
std::optional<double> SizeValue(std::string_view text) {
  std::string s = Trim(text);
  size_t used = 0;
  auto number = ParseNumber(s, &used);
  if (!number) return std::nullopt;
  std::string unit = Trim(std::string_view(s).substr(used));
  struct U {
    const char* name;
    double factor;
  };
  static const U kUnits[] = {
      {"", 1},
      {"B", 1},
      {"kB", 1e3},
      {"KB", 1e3},
      {"MB", 1e6},
      {"GB", 1e9},
      {"TB", 1e12},
      {"PB", 1e15},
      {"KiB", 1024.0},
      {"MiB", 1048576.0},
      {"GiB", 1073741824.0},
      {"TiB", 1099511627776.0},
      {"PiB", 1125899906842624.0},
  };
  for (const U& u : kUnits) {
    if (unit == u.name) {
      double bytes = *number * u.factor;
      if (unit.empty() || unit == "B") {
        if (s.find('.') != std::string::npos) return std::nullopt;  // fractional bytes
      }
      return bytes;
    }
  }
  return std::nullopt;
}

// The duration `text` stands for in milliseconds, unbounded; nullopt if malformed.
std::optional<double> DurationValue(std::string_view text) {
  std::string s = Trim(text);
  if (s.empty()) return std::nullopt;
  double total = 0;
  size_t i = 0;
  while (i < s.size()) {
    size_t used = 0;
    auto number = ParseNumber(std::string_view(s).substr(i), &used);
    if (!number) return std::nullopt;
    i += used;
    size_t j = i;
    while (j < s.size() && std::isalpha(static_cast<unsigned char>(s[j]))) ++j;
    std::string unit = s.substr(i, j - i);
    double factor;
    if (unit == "ms")
      factor = 1;
    else if (unit == "s")
      factor = 1e3;
    else if (unit == "m" || unit == "min")
      factor = 60e3;
    else if (unit == "h")
      factor = 3600e3;
    else if (unit == "d")
      factor = 86400e3;
    else
      return std::nullopt;
    total += *number * factor;
    i = j;
  }
  return total;
}

}  // namespace

std::optional<uint64_t> ParseSize(std::string_view text) {
  std::optional<double> bytes = SizeValue(text);
  if (!bytes || !(*bytes <= static_cast<double>(kMaxSizeBytes))) return std::nullopt;
  return static_cast<uint64_t>(std::llround(*bytes));
}

bool SizeTooLarge(std::string_view text) {
  std::optional<double> bytes = SizeValue(text);
  return bytes && !(*bytes <= static_cast<double>(kMaxSizeBytes));
}

std::optional<uint64_t> ParseDurationMs(std::string_view text) {
  std::optional<double> ms = DurationValue(text);
  if (!ms || !(*ms <= static_cast<double>(kMaxDurationMs))) return std::nullopt;
  return static_cast<uint64_t>(std::llround(*ms));
}

bool DurationTooLong(std::string_view text) {
  std::optional<double> ms = DurationValue(text);
  return ms && !(*ms <= static_cast<double>(kMaxDurationMs));
}

std::string FormatBytes(uint64_t bytes) {
  static const char* kNames[] = {"B", "kB", "MB", "GB", "TB", "PB", "EB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1000.0 && u < 6) {
    v /= 1000.0;
    ++u;
  }
  char buf[32];
  if (u == 0)
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  else if (v >= 100)
    std::snprintf(buf, sizeof buf, "%.0f %s", v, kNames[u]);
  else if (v >= 10)
    std::snprintf(buf, sizeof buf, "%.1f %s", v, kNames[u]);
  else
    std::snprintf(buf, sizeof buf, "%.2f %s", v, kNames[u]);
  std::string out = buf;
  // "1.20 TB" and "230.0 GB" read as noise: drop trailing zeros of the fraction.
  auto dot = out.find('.');
  if (dot != std::string::npos) {
    auto space = out.find(' ');
    size_t end = space;
    while (end > dot + 1 && out[end - 1] == '0') --end;
    if (end == dot + 1) end = dot;
    out.erase(end, space - end);
  }
  return out;
}

std::string FormatSize(uint64_t bytes) {
  constexpr uint64_t kGiB = 1ull << 30;
  if (bytes >= kGiB && bytes % kGiB == 0) return std::to_string(bytes / kGiB) + " GiB";
  return FormatBytes(bytes);
}

std::string FormatGiB(uint64_t bytes) {
  char buf[32];
  double gib = static_cast<double>(bytes) / 1073741824.0;
  if (gib >= 0.1)
    std::snprintf(buf, sizeof buf, "%.1f GiB", gib);
  else
    std::snprintf(buf, sizeof buf, "%.0f MiB", static_cast<double>(bytes) / 1048576.0);
  return buf;
}

std::string FormatDurationMs(uint64_t ms) {
  if (ms == 0) return "0s";
  if (ms % 1000 != 0) return std::to_string(ms) + "ms";
  uint64_t s = ms / 1000;
  std::string out;
  if (s >= 3600) {
    out += std::to_string(s / 3600) + "h";
    s %= 3600;
  }
  if (s >= 60) {
    out += std::to_string(s / 60) + "m";
    s %= 60;
  }
  if (s > 0) out += std::to_string(s) + "s";
  return out;
}

std::string FormatDouble(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace berth
