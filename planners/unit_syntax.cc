#include "planners/unit_syntax.h"

#include <cstdio>
#include <sstream>

#include "core/unit_text.h"

namespace berth {
namespace {

// "…" with C escapes for quotes, backslashes and control characters, % → %% (specifiers), and
// $ → $$ where systemd would expand variables. Runs of other bytes are copied whole (every
// argument of every unit of a plan passes here).
std::string Quote(const std::string& text, bool escape_dollar) {
  std::string out;
  out.reserve(text.size() + 8);
  out += '"';
  size_t plain = 0;  // where the run of bytes copied as they are began
  for (size_t i = 0; i < text.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c != 0x7f && c != '\\' && c != '"' && c != '%' && (c != '$' || !escape_dollar))
      continue;
    out.append(text, plain, i - plain);
    plain = i + 1;
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      case '%':
        out += "%%";
        break;
      case '$':
        out += "$$";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default: {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\x%02x", c);
        out += buf;
      }
    }
  }
  out.append(text, plain, std::string::npos);
  out += '"';
  return out;
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool IsBlank(char c) { return c == ' ' || c == '\t'; }

}  // namespace

Result<std::string> UnitValue(UnitValueKind kind, const std::string& field,
                              const std::string& value) {
  const UnitTextUse use = kind == UnitValueKind::kPlain ? UnitTextUse::kRaw : UnitTextUse::kQuoted;
  if (std::string problem = UnitValueProblem(value, use); !problem.empty())
    return Status::InvalidArgument(field + " " + problem);
  switch (kind) {
    case UnitValueKind::kExecArg:
      return Quote(value, true);
    case UnitValueKind::kEnvAssignment:
      return Quote(value, false);
    case UnitValueKind::kPlain:
      break;
  }
  if (!value.empty() && (IsBlank(value.front()) || IsBlank(value.back())))
    return Status::InvalidArgument(field + " starts or ends with a space; systemd would drop it");
  if (!value.empty() && value.back() == '\\')
    return Status::InvalidArgument(field +
                                   " ends with a backslash; systemd would read the next "
                                   "line as part of it");
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '%') out += '%';  // a specifier's '%' written twice
    out += c;
  }
  return out;
}

std::string QuoteExecArg(const std::string& arg) { return Quote(arg, true); }

std::string QuoteEnvAssignment(const std::string& assignment) { return Quote(assignment, false); }

std::vector<std::string> SplitExecLine(const std::string& line) {
  std::vector<std::string> argv;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    if (i >= line.size()) break;
    std::string arg;
    bool quoted = line[i] == '"';
    if (quoted) ++i;
    while (i < line.size()) {
      char c = line[i];
      if (quoted && c == '"') {
        ++i;
        break;
      }
      if (!quoted && (c == ' ' || c == '\t')) break;
      if (c == '\\' && i + 1 < line.size()) {
        char n = line[i + 1];
        i += 2;
        if (n == 'n')
          arg += '\n';
        else if (n == 't')
          arg += '\t';
        else if (n == 'r')
          arg += '\r';
        else if (n == 'x' && i + 1 < line.size() && HexDigit(line[i]) >= 0 &&
                 HexDigit(line[i + 1]) >= 0) {
          arg += static_cast<char>(HexDigit(line[i]) * 16 + HexDigit(line[i + 1]));
          i += 2;
        } else if (n == 'x') {
          arg += "\\x";  // malformed: kept as written
        } else
          arg += n;
        continue;
      }
      if ((c == '%' || c == '$') && i + 1 < line.size() && line[i + 1] == c) {
        arg += c;
        i += 2;
        continue;
      }
      arg += c;
      ++i;
    }
    argv.push_back(std::move(arg));
  }
  return argv;
}

UnitEntries ParseUnitEntries(const std::string& content) {
  UnitEntries out;
  std::istringstream in(content);
  std::string line, section;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line[0] == '[') {
      section = line.substr(1, line.find(']') - 1);
      continue;
    }
    size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    out.emplace_back(section + "." + line.substr(0, eq), line.substr(eq + 1));
  }
  return out;
}

}  // namespace berth
