// systemd unit-file syntax: the one writer of a unit file's values (UnitValue), quoting an
// ExecStart= argument or an Environment= assignment, reading an ExecStart= line back, and the
// key=value entries of a unit file. Pure.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/status.h"

namespace berth {

/// How systemd reads a directive's value (systemd.service(5), systemd.exec(5), systemd.unit(5)),
/// and so how berth must write it.
enum class UnitValueKind {
  /// One word of ExecStart=: quoted, with C escapes; specifiers (%) and variables ($) expanded.
  kExecArg,
  /// One Environment= assignment "KEY=value": quoted, with C escapes; specifiers expanded, $ not.
  kEnvAssignment,
  /// The rest of the line, taken as written (Description=, EnvironmentFile=): no quotes, no
  /// escapes, specifiers expanded, leading and trailing whitespace dropped, a trailing backslash
  /// joins the next line.
  kPlain,
};

/// `value` as it must follow "Key=" so that systemd reads back exactly `value`, or
/// InvalidArgument naming `field` ("description contains a newline; a unit file value cannot")
/// when no writing is safe (UnitValueProblem): for kPlain any control character, leading or
/// trailing whitespace and a trailing backslash; for the quoted kinds a NUL (a newline or a tab is
/// escaped inside the quotes and reaches the process as it was). Every value berth writes into a
/// unit goes through here.
Result<std::string> UnitValue(UnitValueKind kind, const std::string& field,
                              const std::string& value);

/// One argument quoted for ExecStart= by systemd's rules: "…" with \\ \" \n \t \xNN escapes,
/// % → %%, $ → $$.
std::string QuoteExecArg(const std::string& arg);
/// One Environment= assignment "KEY=value", quoted: C escapes and % → %% apply, $ does not.
std::string QuoteEnvAssignment(const std::string& assignment);
/// The inverse of QuoteExecArg, for reading an ExecStart= line back into argv. The line may come
/// from a unit edited by hand: never throws; a malformed escape ("\\xZZ", a backslash at the
/// end) is kept as written.
std::vector<std::string> SplitExecLine(const std::string& line);

/// A unit file's settings in file order, as ("Section.Key", value); comments and blank lines
/// are skipped, a key set twice appears twice.
using UnitEntries = std::vector<std::pair<std::string, std::string>>;
UnitEntries ParseUnitEntries(const std::string& content);

}  // namespace berth
