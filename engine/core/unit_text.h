// What text a systemd unit file value can hold. A unit file is line-based: a newline in a value
// starts a new directive, so a value with a control character is refused, never escaped. Shared
// by the manifest loader (which reports it at the value's position) and the unit writer (which
// refuses it again). Pure.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace berth {

/// "" when `value` may be written into a unit file; otherwise what is wrong with it, worded to
/// follow the field's name: "contains a newline; a unit file value cannot". Refused: every C0
/// control character (newline, carriage return, tab, NUL, ...) and DEL.
inline std::string UnitValueProblem(std::string_view value) {
  for (unsigned char c : value) {
    if (c >= 0x20 && c != 0x7f) continue;
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
