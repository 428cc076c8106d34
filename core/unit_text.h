// What text a systemd unit file value can hold. A unit file is line-based: a newline in a value
// systemd takes as written starts a new directive, so there a control character is refused. Shared
// by the manifest loader (which reports it at the value's position) and the unit writer (which
// refuses it again). Pure.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace berth {

/// Where a value lands in a unit file.
enum class UnitTextUse {
  /// Taken as written, to the end of the line (Description=, EnvironmentFile=), or a name or
  /// path that also lands there: every C0 control character and DEL is refused.
  kRaw,
  /// Inside a quoted word with C escapes (an ExecStart= argument, an Environment= value): a
  /// newline or a tab is written as \n or \t and reaches the process as it was; only NUL, which
  /// systemd cannot unescape, is refused.
  kQuoted,
};

/// "" when `value` may be written into a unit file where `use` says; otherwise what is wrong with
/// it, worded to follow the field's name: "contains a newline; a unit file value cannot".
inline std::string UnitValueProblem(std::string_view value, UnitTextUse use = UnitTextUse::kRaw) {
  for (unsigned char c : value) {
    if (use == UnitTextUse::kQuoted ? c != 0 : c >= 0x20 && c != 0x7f) continue;
    std::string what;
    switch (c) {
      case '\n':
        what = "a newline";
        break;
      case '\r':
        what = "a carriage return";
        break;
      case '\t':
        what = "a tab";
        break;
      case '\0':
        what = "a NUL byte";
        break;
      default: {
        char buf[8];
        std::snprintf(buf, sizeof buf, "0x%02x", c);
        what = std::string("the control character ") + buf;
      }
    }
    return "contains " + what + "; a unit file value cannot";
  }
  return "";
}

}  // namespace berth
