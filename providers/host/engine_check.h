// The engine check at apply time (an Action of reason kEngineCheck, planners/preflight.h): the
// environment systemd gives the unit's process, and the command that runs the engine's own
// validation with the interpreter of the unit's executable. Reads the executable's first line
// and the unit's EnvironmentFile=, both bounded and untrusted; never throws.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/plan.h"
#include "core/status.h"

namespace berth {

/// systemd's fixed search path for an ExecStart= name without a slash, which is also the PATH
/// it gives a system service (systemd.exec(5), "Command lines"; "Environment variables in
/// spawned processes").
inline constexpr char kSystemdSearchPath[] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin";

/// The assignments of an EnvironmentFile= as systemd reads them, in order: systemd's
/// parse_env_file_internal and load_env_file (src/basic/env-file.c at systemd commit
/// 0002453b101dc85db2be76703a85297a59c646a9): # and ; start a comment line, whitespace around
/// the key and before the value is dropped, a value may be 'single' or "double" quoted (in
/// double quotes a backslash escapes " \ ` $ and a newline), an unquoted backslash escapes the
/// next character (a newline: the line goes on), trailing whitespace of an unquoted value is
/// dropped; then, as when systemd execs, assignments whose name is not a valid variable name
/// are left out, and a later one replaces an earlier one of the same name.
std::vector<std::pair<std::string, std::string>> ParseEnvironmentFile(std::string_view text);

/// The environment of the unit's process as far as berth knows it: the manager's environment
/// for services (`manager`, SystemdManager::ManagerEnvironment; PATH is systemd's search path
/// when it names none), then the unit's Environment= (`a.env`), then the assignments of its
/// EnvironmentFile= (`a.env_file`, read now; systemd lets them override Environment=). A
/// missing or unreadable file is an error, as systemd then refuses to start the unit.
Result<std::vector<std::string>> UnitEnvironment(const Action& a,
                                                 const std::vector<std::string>& manager = {});

/// The argv that runs the engine check of `a` with `env` (UnitEnvironment): for vllm,
/// `<interpreter of argv[0]> <check_dir>/<check_program> <argv[1:]>` (check_program a file name
/// in berth's engine-check folder `check_dir`: a plan names no other program); for sglang the same
/// with the server's arguments (after `-m sglang.launch_server` or the `serve` subcommand); for
/// llama-server `<argv[0]> <argv[1:]> --help`: llama.cpp's whole argument parse of the exact argv
/// (every handler, value and chat template), then its usage and exit 0, loading no weights; the
/// second half is LlamaFitParamsCommand. argv[0] without a slash is looked up along
/// kSystemdSearchPath, as systemd does; the interpreter is the `#!` line of the executable (a
/// Python executable is its own interpreter for sglang); `#!/usr/bin/env NAME` looks NAME up
/// along the PATH of `env`. FailedPrecondition, saying what to set, when the executable is not a
/// Python program.
Result<std::vector<std::string>> EngineCheckCommand(const Action& a,
                                                    const std::vector<std::string>& env,
                                                    const std::string& check_dir);

/// The second half of llama-server's engine check, once its own parser took the argv:
/// `<folder of server_exe>/llama-fit-params -v <the flags of argv[1:] it accepts>`, which reads
/// the GGUF's metadata (no weights) and fits the context into free memory, failing for a missing
/// or corrupt model or a context that cannot fit, and prints the memory breakdown. The flags and
/// how many values each takes come from the llama_server catalogue ("fit_params", "values");
/// llama-fit-params refuses the others (--port, --alias...). `server_exe` is the resolved argv[0]
/// (EngineCheckCommand's first element). FailedPrecondition, saying what happened, what it
/// affects and what to do, when llama-fit-params is not there or the argv has a flag the
/// catalogue does not know.
Result<std::vector<std::string>> LlamaFitParamsCommand(const Action& a,
                                                       const std::string& server_exe);

}  // namespace berth
