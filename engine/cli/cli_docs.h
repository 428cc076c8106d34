// berth's man page and bash completion, written from the CLI11 command tree main.cc builds
// (`berth __man`, `berth completion bash`), so that neither drifts from the commands and options
// berth accepts. The build generates both from the built binary and installs them.
#pragma once

#include <iosfwd>
#include <string_view>

namespace CLI {
class App;
}

namespace berth {

/// Writes berth(1) in man(7) roff: NAME, SYNOPSIS, DESCRIPTION, COMMANDS with one subsection per
/// visible subcommand of `app` (its usage, what it does, every option with its default), the
/// global options, exit status, environment, files. Hidden subcommands (empty group) are left
/// out. `version` goes into the page's header; the page carries no date, so that the same
/// berth always writes the same page.
void WriteManPage(const CLI::App& app, std::string_view version, std::ostream& out);

/// Writes a bash completion script for `berth`: the subcommands, each one's options, file names
/// after options that take a path, the words of --output, --log-level and `completion`'s shell.
/// Hidden subcommands are left out.
void WriteBashCompletion(const CLI::App& app, std::ostream& out);

}  // namespace berth
