// systemd unit-file syntax: quoting an ExecStart= argument or an Environment= assignment, reading
// an ExecStart= line back, and the key=value entries of a unit file. Pure.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace berth {

/// One argument quoted for ExecStart= by systemd's rules: "…" with \\ \" \n \t \xNN escapes,
/// % → %%, $ → $$.
std::string QuoteExecArg(const std::string& arg);
/// One Environment= assignment "KEY=value", quoted: C escapes and % → %% apply, $ does not.
std::string QuoteEnvAssignment(const std::string& assignment);
/// The inverse of QuoteExecArg, for reading an ExecStart= line back into argv.
std::vector<std::string> SplitExecLine(const std::string& line);

/// A unit file's settings in file order, as ("Section.Key", value); comments and blank lines
/// are skipped, a key set twice appears twice.
using UnitEntries = std::vector<std::pair<std::string, std::string>>;
UnitEntries ParseUnitEntries(const std::string& content);

}  // namespace berth
