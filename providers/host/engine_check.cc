#include "providers/host/engine_check.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/read_file.h"
#include "core/untrusted_text.h"
#include "planners/servers/catalogue.h"

namespace berth {
namespace {

// The bounds on what berth reads: an EnvironmentFile= (systemd reads any size; a unit's is a
// few lines), and an executable's first line (the kernel reads 256 bytes: BINPRM_BUF_SIZE).
constexpr uint64_t kMaxEnvFileBytes = 1 << 20;
constexpr size_t kShebangBytes = 256;

// systemd's env_name_is_valid: letters, digits and '_', not starting with a digit.
bool ValidName(std::string_view k) {
  if (k.empty() || (k[0] >= '0' && k[0] <= '9')) return false;
  for (char c : k)
    if (!(c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')))
      return false;
  return true;
}

void Replace(std::vector<std::pair<std::string, std::string>>* env, std::string key,
             std::string value) {
  for (auto& [k, v] : *env)
    if (k == key) {
      v = std::move(value);
      return;
    }
  env->emplace_back(std::move(key), std::move(value));
}

bool IsWhitespace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool IsNewline(char c) { return c == '\n' || c == '\r'; }

std::string Join(const std::string& a, const std::string& b) {
  return std::string(a).append("=").append(b);
}

// The regular file `name` in one of the folders of `path` (':' separated) that is executable.
std::string Lookup(const std::string& name, std::string_view path) {
  for (size_t from = 0; from <= path.size();) {
    size_t colon = std::min(path.find(':', from), path.size());
    std::string dir(path.substr(from, colon - from));
    from = colon + 1;
    if (dir.empty() || dir[0] != '/') continue;
    std::string candidate = dir + "/" + name;
    struct stat st {};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        ::access(candidate.c_str(), X_OK) == 0)
      return candidate;
  }
  return "";
}

std::string EnvValue(const std::vector<std::string>& env, std::string_view key) {
  std::string value;
  for (const std::string& e : env)
    if (e.size() > key.size() && e.compare(0, key.size(), key) == 0 && e[key.size()] == '=')
      value = e.substr(key.size() + 1);
  return value;
}

bool IsPython(const std::string& path) {
  std::string base = path.substr(path.rfind('/') + 1);
  if (base.rfind("python", 0) != 0) return false;
  for (char c : base.substr(6))
    if (!((c >= '0' && c <= '9') || c == '.')) return false;
  return true;
}

// The first line of `path` when it starts with "#!": the interpreter and its one argument
// (Linux passes the rest of the line as one). `why` says what is wrong when it returns false.
bool Shebang(const std::string& path, std::string* interpreter, std::string* arg,
             std::string* why) {
  FileReadOptions options;
  options.follow_links = true;
  Result<int> fd = OpenRegularFile(path, options);
  if (!fd.ok()) {
    *why = fd.status().message();
    return false;
  }
  char buf[kShebangBytes];
  ssize_t n;
  do {
    n = ::read(*fd, buf, sizeof buf);
  } while (n < 0 && errno == EINTR);
  int read_errno = errno;
  ::close(*fd);
  if (n < 0) {
    *why = "cannot read " + path + ": " + std::strerror(read_errno);
    return false;
  }
  std::string_view head(buf, static_cast<size_t>(n));
  if (head.substr(0, 2) != "#!") {
    *why = path + " does not start with #! (it is not a script)";
    return false;
  }
  size_t nl = head.find('\n');
  if (nl == std::string_view::npos) {
    *why =
        "the first line of " + path + " is longer than " + std::to_string(kShebangBytes) + " bytes";
    return false;
  }
  std::string_view line = head.substr(2, nl - 2);
  while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
  while (!line.empty() && IsWhitespace(line.back())) line.remove_suffix(1);
  size_t sp = line.find_first_of(" \t");
  std::string_view interp = line.substr(0, sp);
  std::string_view rest = sp == std::string_view::npos ? "" : line.substr(sp);
  while (!rest.empty() && (rest.front() == ' ' || rest.front() == '\t')) rest.remove_prefix(1);
  if (interp.empty() || interp[0] != '/' || !IsUtf8(line) ||
      EscapeControl(line) != std::string(line)) {
    *why = "the first line of " + path + " names no interpreter by absolute path: #!" +
           EscapeLine(Utf8Prefix(line, 120));
    return false;
  }
  *interpreter = std::string(interp);
  *arg = std::string(rest);
  return true;
}

Status NotPython(const Action& a, const std::string& exe, const std::string& why) {
  return Status::FailedPrecondition(
      "the engine check of " + a.address + " cannot run: " + exe +
      " is not a Python program berth can run the check with (" + why + "). berth runs " +
      a.As<PreflightStep>().engine +
      "'s own validation with the interpreter of the unit's executable: set the "
      "service's executable to the virtualenv's " +
      (a.As<PreflightStep>().engine == "vllm" ? std::string("vllm") : std::string("python")) +
      " (e.g. /opt/venv/bin/" + (a.As<PreflightStep>().engine == "vllm" ? "vllm" : "python") +
      "), or set preflight: {engine: off} on the service to skip the check");
}

// The interpreter (and its argument, if any) that runs the script `exe`.
Result<std::vector<std::string>> InterpreterOf(const Action& a, const std::string& exe,
                                               const std::vector<std::string>& env) {
  std::string interp, arg, why;
  if (!Shebang(exe, &interp, &arg, &why)) return NotPython(a, exe, why);
  if (interp.substr(interp.rfind('/') + 1) == "env") {
    // #!/usr/bin/env NAME: NAME along the process's PATH (env's -S and assignments refused).
    if (arg.empty() || arg[0] == '-' || arg.find_first_of(" \t=") != std::string::npos)
      return NotPython(a, exe, "its #! line runs env with '" + EscapeLine(arg) + "'");
    std::string path = EnvValue(env, "PATH");
    std::string found = arg.find('/') == std::string::npos ? Lookup(arg, path) : arg;
    if (found.empty())
      return NotPython(a, exe,
                       "its #! line runs env " + arg + ", and no " + arg +
                           " is on the unit's PATH (" + EscapeLine(path) + ")");
    interp = found;
    arg.clear();
  }
  if (!IsPython(interp))
    return NotPython(a, exe, "its #! line names " + EscapeLine(interp) + ", not python");
  std::vector<std::string> out = {interp};
  if (!arg.empty()) out.push_back(arg);
  return out;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> ParseEnvironmentFile(std::string_view text) {
  std::vector<std::pair<std::string, std::string>> out;
  enum {
    kPreKey,
    kKey,
    kPreValue,
    kValue,
    kValueEscape,
    kSingle,
    kDouble,
    kDoubleEscape,
    kComment,
    kCommentEscape
  } state = kPreKey;
  std::string key, value;
  size_t key_ws = std::string::npos, value_ws = std::string::npos;
  auto push = [&] {
    if (key_ws != std::string::npos) key.resize(key_ws);
    if (ValidName(key)) Replace(&out, key, value);
    key.clear();
    value.clear();
  };
  for (char c : text) {
    switch (state) {
      case kPreKey:
        if (c == '#' || c == ';') {
          state = kComment;
        } else if (!IsWhitespace(c)) {
          state = kKey;
          key_ws = std::string::npos;
          key.push_back(c);
        }
        break;
      case kKey:
        if (IsNewline(c)) {
          state = kPreKey;
          key.clear();
        } else if (c == '=') {
          state = kPreValue;
          value_ws = std::string::npos;
        } else {
          if (!IsWhitespace(c))
            key_ws = std::string::npos;
          else if (key_ws == std::string::npos)
            key_ws = key.size();
          key.push_back(c);
        }
        break;
      case kPreValue:
        if (IsNewline(c)) {
          state = kPreKey;
          push();
        } else if (c == '\'') {
          state = kSingle;
        } else if (c == '"') {
          state = kDouble;
        } else if (c == '\\') {
          state = kValueEscape;
        } else if (!IsWhitespace(c)) {
          state = kValue;
          value.push_back(c);
        }
        break;
      case kValue:
        if (IsNewline(c)) {
          state = kPreKey;
          if (value_ws != std::string::npos) value.resize(value_ws);
          push();
        } else if (c == '\\') {
          state = kValueEscape;
          value_ws = std::string::npos;
        } else {
          if (!IsWhitespace(c))
            value_ws = std::string::npos;
          else if (value_ws == std::string::npos)
            value_ws = value.size();
          value.push_back(c);
        }
        break;
      case kValueEscape:
        state = kValue;
        if (!IsNewline(c)) value.push_back(c);
        break;
      case kSingle:
        if (c == '\'')
          state = kPreValue;
        else
          value.push_back(c);
        break;
      case kDouble:
        if (c == '"')
          state = kPreValue;
        else if (c == '\\')
          state = kDoubleEscape;
        else
          value.push_back(c);
        break;
      case kDoubleEscape:
        state = kDouble;
        if (c == '"' || c == '\\' || c == '`' || c == '$') {
          value.push_back(c);
        } else if (c != '\n') {
          value.push_back('\\');
          value.push_back(c);
        }
        break;
      case kComment:
        if (c == '\\')
          state = kCommentEscape;
        else if (IsNewline(c))
          state = kPreKey;
        break;
      case kCommentEscape:
        state = IsNewline(c) ? kPreKey : kComment;
        break;
    }
  }
  if (state == kPreValue || state == kValue || state == kValueEscape || state == kSingle ||
      state == kDouble || state == kDoubleEscape) {
    if (state == kValue && value_ws != std::string::npos) value.resize(value_ws);
    push();
  }
  return out;
}

Result<std::vector<std::string>> UnitEnvironment(const Action& a,
                                                 const std::vector<std::string>& manager) {
  std::vector<std::pair<std::string, std::string>> env = {{"PATH", kSystemdSearchPath}};
  auto assign = [&](const std::vector<std::string>& list) {
    for (const std::string& e : list) {
      size_t eq = e.find('=');
      if (eq == std::string::npos || eq == 0) continue;  // not an assignment: none such
      Replace(&env, e.substr(0, eq), e.substr(eq + 1));
    }
  };
  assign(manager);
  assign(a.As<PreflightStep>().env);
  if (!a.As<PreflightStep>().env_file.empty()) {
    FileReadOptions options;
    options.follow_links = true;
    options.max_bytes = kMaxEnvFileBytes;
    Result<std::string> text = ReadRegularFile(a.As<PreflightStep>().env_file, options);
    if (!text.ok())
      return Status::FailedPrecondition(
          "the engine check of " + a.address + " cannot read the unit's EnvironmentFile=: " +
          text.status().message() + "; systemd would not start the unit either");
    if (!IsUtf8(*text))
      return Status::FailedPrecondition(
          "the engine check of " + a.address + ": " + a.As<PreflightStep>().env_file +
          " (the unit's EnvironmentFile=) is not UTF-8 text, which systemd refuses");
    for (auto& [k, v] : ParseEnvironmentFile(*text)) Replace(&env, k, v);
  }
  std::vector<std::string> out;
  for (const auto& [k, v] : env) out.push_back(Join(k, v));
  return out;
}

Result<std::vector<std::string>> EngineCheckCommand(const Action& a,
                                                    const std::vector<std::string>& env,
                                                    const std::string& check_dir) {
  if (a.As<PreflightStep>().argv.empty() || a.As<PreflightStep>().argv[0].empty())
    return Status::InvalidArgument("the engine check of " + a.address + " has no command");
  if (a.As<PreflightStep>().engine != "llama-server" &&
      (a.As<PreflightStep>().check_program.empty() ||
       a.As<PreflightStep>().check_program.find('/') != std::string::npos ||
       a.As<PreflightStep>().check_program[0] == '.' || check_dir.empty()))
    return Status::FailedPrecondition(
        "the engine check of " + a.address + " cannot run: " +
        (check_dir.empty()
             ? std::string("berth's engine-check programs are not installed next to "
                           "it")
             : "its check program '" + EscapeLine(a.As<PreflightStep>().check_program) +
                   "' is not a file name") +
        "; reinstall berth, or set preflight: {engine: off} on the service");
  std::string exe = a.As<PreflightStep>().argv[0];
  if (exe.find('/') == std::string::npos) {
    std::string found = Lookup(exe, kSystemdSearchPath);
    if (found.empty())
      return Status::FailedPrecondition(
          "the engine check of " + a.address + " cannot run: " + exe + " is not in " +
          kSystemdSearchPath +
          ", where systemd looks for it, so the unit would not start either. Set the "
          "service's executable (or host.executables) to its absolute path");
    exe = found;
  }
  std::vector<std::string> rest(a.As<PreflightStep>().argv.begin() + 1,
                                a.As<PreflightStep>().argv.end());
  if (a.As<PreflightStep>().engine == "llama-server") {
    std::vector<std::string> cmd = {exe};
    cmd.insert(cmd.end(), rest.begin(), rest.end());
    cmd.push_back("--help");
    return cmd;
  }
  if (a.As<PreflightStep>().engine != "vllm" && a.As<PreflightStep>().engine != "sglang")
    return Status::InvalidArgument("the engine check of " + a.address + " names engine '" +
                                   a.As<PreflightStep>().engine +
                                   "', which berth has no check for");
  std::vector<std::string> cmd;
  if (a.As<PreflightStep>().engine == "sglang" && IsPython(exe)) {
    cmd = {exe};
    // python -m sglang.launch_server ARGS: the check gets ARGS.
    if (rest.size() >= 2 && rest[0] == "-m" && rest[1] == "sglang.launch_server")
      rest.erase(rest.begin(), rest.begin() + 2);
  } else {
    Result<std::vector<std::string>> interp = InterpreterOf(a, exe, env);
    if (!interp.ok()) return interp.status();
    cmd = *interp;
    if (a.As<PreflightStep>().engine == "sglang" && !rest.empty() && rest[0] == "serve")
      rest.erase(rest.begin());
  }
  cmd.push_back(check_dir + "/" + a.As<PreflightStep>().check_program);
  cmd.insert(cmd.end(), rest.begin(), rest.end());
  return cmd;
}

Result<std::vector<std::string>> LlamaFitParamsCommand(const Action& a,
                                                       const std::string& server_exe) {
  const std::vector<std::string>& argv = a.As<PreflightStep>().argv;
  const std::string fit = server_exe.substr(0, server_exe.rfind('/') + 1) + "llama-fit-params";
  struct stat st {};
  if (::stat(fit.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || ::access(fit.c_str(), X_OK) != 0)
    return Status::FailedPrecondition(
        "the engine check of " + a.address + " cannot run llama-fit-params: there is no " +
        "executable " + EscapeLine(fit) + " next to " + EscapeLine(server_exe) +
        ", so berth cannot tell whether the model file loads and its context fits before the "
        "running server is stopped. Install llama.cpp's llama-fit-params (built with "
        "llama-server, same release) into that folder, or set preflight: {engine: off} on the "
        "service to skip the check");
  const EngineCatalogue& cat = Catalogue(CatalogueEngine::kLlamaServer);
  std::vector<std::string> cmd = {fit, "-v"};
  for (size_t i = 1; i < argv.size();) {
    const CatalogueFlag* f = argv[i].starts_with("-") ? cat.Find(argv[i]) : nullptr;
    if (f == nullptr || argv[i].find('=') != std::string::npos)
      return Status::FailedPrecondition(
          "the engine check of " + a.address + ": llama-server accepted '" +
          EscapeLine(Utf8Prefix(argv[i], 200)) + "', which berth's catalogue of llama-server " +
          "(llama.cpp " + cat.commit.substr(0, 7) +
          ") does not know, so berth cannot tell whether llama-fit-params takes it or how "
          "many values follow it; nothing was stopped or started. Use the llama.cpp release "
          "of the catalogue (docs/engines.md), or set preflight: {engine: off} on the service");
    size_t end = std::min(argv.size(), i + 1 + static_cast<size_t>(f->values));
    if (f->fit_params)
      cmd.insert(cmd.end(), argv.begin() + static_cast<std::ptrdiff_t>(i),
                 argv.begin() + static_cast<std::ptrdiff_t>(end));
    i = end;
  }
  return cmd;
}

}  // namespace berth
