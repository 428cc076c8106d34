#include "engine/cli/cli_docs.h"

#include <CLI/CLI.hpp>

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <map>
#include <ostream>
#include <set>
#include <string>
#include <vector>

namespace berth {
namespace {

// Options and positionals whose value is a path: completion offers file names after them.
const std::set<std::string> kPathValues = {"file",        "observed",     "out",
                                           "state-dir",   "store",        "metrics",
                                           "journal-dir", "nvml-library", "plan"};

// Options and positionals whose value is one of a few words.
std::string ValueWords(const std::string& name) {
  if (name == "output") return "text json";
  if (name == "log-level") return "trace debug info warn error off";
  if (name == "shell") return "bash";
  return "";
}

bool Visible(const CLI::App* sub) { return !sub->get_group().empty(); }

std::vector<const CLI::App*> Commands(const CLI::App& app) {
  return app.get_subcommands([](const CLI::App* sub) { return Visible(sub); });
}

// The options a user can give `app`, without --help and --version (the global section lists
// those once).
std::vector<const CLI::Option*> Options(const CLI::App& app) {
  return app.get_options([&app](const CLI::Option* opt) {
    return !opt->get_group().empty() && opt != app.get_help_ptr() && opt != app.get_version_ptr();
  });
}

bool IsFlag(const CLI::Option* opt) { return opt->get_expected_max() == 0; }

// The option's name without dashes: its first long name, else its short name, else (a
// positional) its positional name.
std::string Key(const CLI::Option* opt) {
  if (!opt->get_lnames().empty()) return opt->get_lnames().front();
  if (!opt->get_snames().empty()) return opt->get_snames().front();
  return opt->get_name(true);
}

std::string Upper(std::string s) {
  for (char& c : s)
    c = c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// What the value is called in the synopsis: FILE, DIR, PATH or ADDRESS for the options that
// take one, else the positional's or the option's name for text, else CLI11's type (INT, UINT,
// FLOAT).
std::string Placeholder(const CLI::Option* opt) {
  static const std::map<std::string, std::string> kNamed = {
      {"file", "FILE"},     {"observed", "FILE"}, {"out", "FILE"},        {"metrics", "FILE"},
      {"state-dir", "DIR"}, {"store", "DIR"},     {"journal-dir", "DIR"}, {"nvml-library", "PATH"},
      {"bus", "ADDRESS"},   {"output", "FORMAT"}, {"log-level", "LEVEL"}};
  std::string type = opt->get_type_name();
  if (auto named = kNamed.find(Key(opt)); named != kNamed.end() && opt->nonpositional())
    type = named->second;
  else if (!opt->nonpositional() || type.empty() || type.rfind("TEXT", 0) == 0)
    type = Upper(Key(opt));
  if (opt->get_expected_max() > 1) type += "...";
  return type;
}

// Text for roff: backslashes and minus signs escaped, a leading '.' or '\'' made literal,
// characters beyond ASCII as \[uXXXX] (so the page needs no input encoding).
std::string Roff(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    auto c = static_cast<unsigned char>(text[i]);
    if (c == '\\') {
      out += "\\e";
    } else if (c == '-') {
      out += "\\-";
    } else if (c < 0x80) {
      out += static_cast<char>(c);
    } else {
      int extra = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : 1;
      uint32_t cp = c & (0x3F >> extra);
      for (int k = 0; k < extra && i + 1 < text.size(); ++k)
        cp = (cp << 6) | (static_cast<unsigned char>(text[++i]) & 0x3F);
      char buf[16];
      std::snprintf(buf, sizeof buf, "\\[u%04X]", static_cast<unsigned>(cp));
      out += buf;
    }
  }
  if (!out.empty() && (out[0] == '.' || out[0] == '\'')) out.insert(0, "\\&");
  return out;
}

// "\fB\-f\fR, \fB\-\-file\fR \fIFILE\fR" (all names), or the positional's name.
std::string OptionHead(const CLI::Option* opt) {
  if (!opt->nonpositional()) return "\\fI" + Roff(Placeholder(opt)) + "\\fR";
  std::string head;
  for (const std::string& s : opt->get_snames())
    head += (head.empty() ? "" : ", ") + ("\\fB\\-" + Roff(s) + "\\fR");
  for (const std::string& l : opt->get_lnames())
    head += (head.empty() ? "" : ", ") + ("\\fB\\-\\-" + Roff(l) + "\\fR");
  if (!IsFlag(opt)) head += " \\fI" + Roff(Placeholder(opt)) + "\\fR";
  return head;
}

// One option in a synopsis: "\fB\-\-out\fR \fIOUT\fR", in brackets unless required.
std::string SynopsisItem(const CLI::Option* opt) {
  std::string item;
  if (!opt->nonpositional()) {
    item = "\\fI" + Roff(Placeholder(opt)) + "\\fR";
  } else {
    item = opt->get_snames().empty() ? "\\fB\\-\\-" + Roff(opt->get_lnames().front()) + "\\fR"
                                     : "\\fB\\-" + Roff(opt->get_snames().front()) + "\\fR";
    if (!IsFlag(opt)) item += " \\fI" + Roff(Placeholder(opt)) + "\\fR";
  }
  return opt->get_required() ? item : "[" + item + "]";
}

void WriteOptionList(const std::vector<const CLI::Option*>& options, std::ostream& out) {
  for (const CLI::Option* opt : options) {
    std::string text = opt->get_description();
    if (opt->get_required()) text += " (required)";
    if (!opt->get_default_str().empty()) text += " (default: " + opt->get_default_str() + ")";
    out << ".TP\n" << OptionHead(opt) << "\n" << Roff(text) << "\n";
  }
}

// `cmd`'s section, then one per subcommand of it ("berth fleet status").
void WriteCommand(const CLI::App& cmd, std::ostream& out, const std::string& parent = "") {
  std::string name = parent + cmd.get_name();
  out << ".SS \"berth " << Roff(name) << "\"\n";
  out << ".B berth " << Roff(name) << "\n";
  std::vector<const CLI::Option*> options = Options(cmd);
  std::string synopsis;
  for (const CLI::Option* opt : options) {
    if (!synopsis.empty()) synopsis += ' ';
    synopsis += SynopsisItem(opt);
  }
  if (!synopsis.empty()) out << synopsis << "\n";
  out << ".PP\n" << Roff(cmd.get_description()) << ".\n";
  WriteOptionList(options, out);
  for (const CLI::App* sub : Commands(cmd)) WriteCommand(*sub, out, name + " ");
}

const char* const kHeadSections = R"(.SH DESCRIPTION
Manifests in git say which models must be on disk and which model servers (vLLM, SGLang,
llama.cpp server, any command) must run on which GPUs and ports. berth observes the host,
plans the change in a safe order with a reason for every step, checks that it fits (disk, GPU
memory, ports) before touching anything, and carries it out through systemd.
.PP
Every command that changes the host (\fBapply\fR, \fBreconcile\fR) first shows the plan that
\fBberth plan\fR prints for the same manifest and host.
)";

const char* const kTailSections = R"(.SH EXIT STATUS
.TP
.B 0
success; with \fBplan \-\-detailed\-exitcode\fR, nothing to do
.TP
.B 1
an error: invalid input, an unreadable file, a failed command
.TP
.B 2
\fBplan \-\-detailed\-exitcode\fR: there are changes to make
.TP
.B 3
the plan cannot run (blocked); what is short is printed
.TP
.B 4
\fBapply\fR: an action failed; what was done and the unit's journal are printed
.TP
.B 5
\fBapply\fR \fIFILE\fR: the host changed since the plan was saved; nothing was done
.SH ENVIRONMENT
.TP
.B BERTH_STATE_DIR
berth's records when \fB\-\-state\-dir\fR is not given (default \fI/var/lib/berth\fR)
.TP
.B BERTH_LOG_LEVEL
operator log level when \fB\-\-log\-level\fR is not given (default warn)
.TP
.BR HF_ENDPOINT ", " HF_TOKEN ", " HF_TOKEN_PATH ", " HF_HOME ", " HF_HUB_CACHE ", " HF_HUB_OFFLINE
the Hugging Face Hub and its cache, as huggingface_hub reads them; the token is only sent to
the Hub's own host
.SH FILES
.TP
.I /etc/berth
the manifests the installed units apply (\fBberth.yaml\fR or a folder of them, with
\fBberth.lock\fR beside them)
.TP
.I /var/lib/berth
berth's records: \fBstate.json\fR, \fBjournal.json\fR, \fBlock\fR, \fBadopted/\fR
.TP
.I /etc/systemd/system
the unit files berth writes for the model servers
.TP
.IR berth.service ", " berth\-reconcile.timer
the installed units that run \fBberth reconcile\fR as a daemon, or one pass every 5 minutes
(enable one of them, not both)
.TP
.IR share/berth/schema.json ", " share/berth/examples/
the manifest language's JSON Schema (for editors) and example manifests, under the install
prefix
.SH SEE ALSO
.BR systemctl (1),
.BR systemd.service (5),
.BR systemd.timer (5),
.BR journalctl (1)
)";

}  // namespace

void WriteManPage(const CLI::App& app, std::string_view version, std::ostream& out) {
  out << ".\\\" berth(1), written by `berth __man` from berth's command tree; do not edit.\n";
  out << ".TH BERTH 1 \"\" \"berth " << Roff(std::string(version)) << "\" \"User Commands\"\n";
  out << ".SH NAME\nberth \\- "
      << Roff(app.get_description().substr(app.get_description().find(':') + 2)) << "\n";
  out << ".SH SYNOPSIS\n.B berth\n[\\fIGLOBAL OPTIONS\\fR] \\fICOMMAND\\fR [\\fIOPTIONS\\fR]\n";
  out << kHeadSections;
  out << ".SH COMMANDS\n";
  for (const CLI::App* cmd : Commands(app)) WriteCommand(*cmd, out);
  out << ".SH GLOBAL OPTIONS\nThese go before or after the command.\n";
  std::vector<const CLI::Option*> global = Options(app);
  if (app.get_version_ptr() != nullptr) global.push_back(app.get_version_ptr());
  if (app.get_help_ptr() != nullptr) global.push_back(app.get_help_ptr());
  WriteOptionList(global, out);
  out << kTailSections;
}

void WriteBashCompletion(const CLI::App& app, std::ostream& out) {
  std::vector<const CLI::App*> commands = Commands(app);
  std::string names, top_words;
  for (const CLI::App* cmd : commands) names += (names.empty() ? "" : "|") + cmd->get_name();
  for (const CLI::Option* opt : Options(app)) top_words += " --" + Key(opt);
  top_words += " --version --help";
  for (const CLI::App* cmd : commands) top_words += " " + cmd->get_name();

  out << "# bash completion for berth(1), written by `berth completion bash` from berth's\n"
         "# command tree. Installed as share/bash-completion/completions/berth; or:\n"
         "#   source <(berth completion bash)\n"
         "_berth() {\n"
         "  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} cmd='' i\n"
         "  local opts='' values='' files=0 positional=''\n"
         "  COMPREPLY=()\n"
         "  for ((i = 1; i < COMP_CWORD; i++)); do\n"
         "    case ${COMP_WORDS[i]} in\n"
         "      "
      << names
      << ") cmd=${COMP_WORDS[i]}; break ;;\n"
         "    esac\n"
         "  done\n"
         "  case $prev in\n"
         "    --log-level) values='"
      << ValueWords("log-level")
      << "' ;;\n"
         "  esac\n"
         "  case $cmd in\n"
         "    '') opts='"
      << top_words.substr(1) << "' ;;\n";
  for (const CLI::App* cmd : commands) {
    std::string opts = "--help", path_opts, word_cases, value_opts;
    std::string positional;
    // A command with subcommands of its own (fleet status): their names come first, and
    // their options are offered after them.
    std::vector<const CLI::Option*> options = Options(*cmd);
    for (const CLI::App* sub : Commands(*cmd)) {
      {
        if (!positional.empty()) positional += ' ';
        positional += sub->get_name();
      }
      for (const CLI::Option* opt : Options(*sub)) options.push_back(opt);
    }
    for (const CLI::Option* opt : options) {
      if (!opt->nonpositional()) {
        std::string key = Key(opt);
        if (kPathValues.count(key))
          positional = "files";
        else if (!ValueWords(key).empty())
          positional = ValueWords(key);
        continue;
      }
      std::string all;
      for (const std::string& s : opt->get_snames()) all += (all.empty() ? "-" : "|-") + s;
      for (const std::string& l : opt->get_lnames()) all += (all.empty() ? "--" : "|--") + l;
      for (const std::string& l : opt->get_lnames()) opts += " --" + l;
      for (const std::string& s : opt->get_snames()) opts += " -" + s;
      if (IsFlag(opt)) continue;
      std::string key = Key(opt);
      if (kPathValues.count(key)) {
        path_opts += (path_opts.empty() ? "" : "|") + all;
      } else if (!ValueWords(key).empty()) {
        word_cases += "        " + all + ") values='" + ValueWords(key) + "' ;;\n";
      } else {
        value_opts += (value_opts.empty() ? "" : "|") + all;
      }
    }
    out << "    " << cmd->get_name() << ")\n"
        << "      opts='" << opts << "'\n"
        << "      positional='" << positional << "'\n"
        << "      case $prev in\n";
    if (!path_opts.empty()) out << "        " << path_opts << ") files=1 ;;\n";
    out << word_cases;
    if (!value_opts.empty()) out << "        " << value_opts << ") return 0 ;;\n";
    out << "      esac ;;\n";
  }
  out << "  esac\n"
         "  if [[ -n $values ]]; then\n"
         "    mapfile -t COMPREPLY < <(compgen -W \"$values\" -- \"$cur\")\n"
         "  elif ((files)) || [[ $cur != -* && $positional == files && -n $cmd ]]; then\n"
         "    compopt -o filenames 2>/dev/null\n"
         "    mapfile -t COMPREPLY < <(compgen -f -- \"$cur\")\n"
         "  elif [[ $cur != -* && -n $cmd && -n $positional ]]; then\n"
         "    mapfile -t COMPREPLY < <(compgen -W \"$positional\" -- \"$cur\")\n"
         "  else\n"
         "    mapfile -t COMPREPLY < <(compgen -W \"$opts\" -- \"$cur\")\n"
         "  fi\n"
         "  return 0\n"
         "}\n"
         "complete -F _berth berth\n";
}

}  // namespace berth
