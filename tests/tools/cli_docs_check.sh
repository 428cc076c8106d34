#!/usr/bin/env bash
# berth(1) and the bash completion (`berth __man`, `berth completion bash`, written from berth's
# command tree) cover every subcommand and every option that `berth --help` and
# `berth COMMAND --help` list; the man page formats without a warning (as lintian checks it);
# the completion completes commands, options and their values in bash.
set -euo pipefail
berth=${1:?berth binary}
fail=0
problem() { echo "cli_docs_check: $*" >&2; fail=1; }

man_page=$("$berth" __man)
completion=$("$berth" completion bash)
mapfile -t commands < <("$berth" --help | awk '/^Subcommands:|^SUBCOMMANDS:/{s=1; next} s && /^  [a-z]/{print $1} s && /^$/{s=0}')
((${#commands[@]} >= 9)) || problem "berth --help lists ${#commands[@]} subcommands; expected at least 9: ${commands[*]}"

for cmd in "${commands[@]}"; do
  section=$(awk -v head=".SS \"berth $cmd\"" '$0 == head {s=1; next} s && /^\.S[SH] /{exit} s' <<<"$man_page")
  [[ -n $section ]] || problem "berth(1) has no section .SS \"berth $cmd\""
  block=$(awk -v head="    $cmd)" '$0 == head {s=1; next} s && /;;$/ && /esac/{exit} s' <<<"$completion")
  [[ -n $block ]] || problem "the bash completion has no case for '$cmd'"
  grep -qE "^      ([a-z|-]*\|)?$cmd(\|[a-z|-]*)?\) cmd=" <<<"$completion" ||
    problem "the bash completion does not recognise '$cmd' as a command"
  mapfile -t options < <("$berth" "$cmd" --help | grep -oE '^ +(-[a-zA-Z],)?--[a-z][a-z-]*' | grep -oE -- '--[a-z][a-z-]*' | grep -vx -- '--help')
  for opt in "${options[@]}"; do
    grep -qF -- "\\fB${opt//-/\\-}\\fR" <<<"$section" || problem "berth(1) section 'berth $cmd' lacks $opt"
    grep -qE -- "(^|[ '|])$opt([ '|)]|$)" <<<"$block" || problem "the bash completion of '$cmd' lacks $opt"
  done
done
# Commands with subcommands of their own (berth fleet status): a section each, with its options,
# and the completion offers their names and options under the parent.
for cmd in "${commands[@]}"; do
  mapfile -t subs < <("$berth" "$cmd" --help | awk '/^Subcommands:|^SUBCOMMANDS:/{s=1; next} s && /^  [a-z]/{print $1} s && /^$/{s=0}')
  block=$(awk -v head="    $cmd)" '$0 == head {s=1; next} s && /;;$/ && /esac/{exit} s' <<<"$completion")
  for sub in "${subs[@]}"; do
    section=$(awk -v head=".SS \"berth $cmd $sub\"" '$0 == head {s=1; next} s && /^\.S[SH] /{exit} s' <<<"$man_page")
    [[ -n $section ]] || problem "berth(1) has no section .SS \"berth $cmd $sub\""
    grep -qE "positional='([a-z ]* )?$sub( [a-z ]*)?'" <<<"$block" ||
      problem "the bash completion of '$cmd' does not offer '$sub'"
    mapfile -t options < <("$berth" "$cmd" "$sub" --help | grep -oE '^ +(-[a-zA-Z],)?--[a-z][a-z-]*' | grep -oE -- '--[a-z][a-z-]*' | grep -vx -- '--help')
    for opt in "${options[@]}"; do
      grep -qF -- "\\fB${opt//-/\\-}\\fR" <<<"$section" || problem "berth(1) section 'berth $cmd $sub' lacks $opt"
      grep -qE -- "(^|[ '|])$opt([ '|)]|$)" <<<"$block" || problem "the bash completion of '$cmd $sub' lacks $opt"
    done
  done
done
grep -q '^\.SS "berth __man"' <<<"$man_page" && problem "berth(1) shows the hidden command __man"

# The page formats without a warning, as lintian's manpage check runs man.
if command -v man >/dev/null; then
  page=$(mktemp --suffix=.1)
  trap 'rm -f "$page"' EXIT
  printf '%s\n' "$man_page" >"$page"
  warnings=$(LC_ALL=C.UTF-8 MANROFFSEQ='' MANWIDTH=80 man --warnings -E UTF-8 -l -Tutf8 -Z "$page" 2>&1 >/dev/null || true)
  [[ -z $warnings ]] || problem "man reports on berth(1): $warnings"
else
  echo "cli_docs_check: man not installed; the page's formatting is not checked"
fi

# The completion, sourced into bash, completes.
complete_words() {  # complete_words WORD... : COMPREPLY for the last word
  bash -c 'source /dev/stdin; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _berth; printf "%s\n" "${COMPREPLY[@]}"' \
    berth "$@" <<<"$completion"
}
expect() {  # expect "WANTED" WORD...
  local want=$1 got
  shift
  got=$(complete_words "$@" | sort | tr '\n' ' ')
  [[ $got == "$want " ]] || problem "completing '$*' gave '$got', expected '$want'"
}
expect "plan" berth pl
expect "--observed --out --output" berth plan --o
expect "json text" berth plan -o ''
expect "json text" berth observe --output ''
expect "debug" berth --log-level d
expect "bash" berth completion ''
expect "--once" berth reconcile --onc
expect "" berth apply --lock-timeout ''
expect "--retry" berth apply --yes --re
mkdir -p "${TMPDIR:-/tmp}/berth-cli-docs-$$" && touch "${TMPDIR:-/tmp}/berth-cli-docs-$$/plan.json"
expect "${TMPDIR:-/tmp}/berth-cli-docs-$$/plan.json" berth apply -f "${TMPDIR:-/tmp}/berth-cli-docs-$$/pl"
rm -rf "${TMPDIR:-/tmp}/berth-cli-docs-$$"

((fail == 0)) && echo "berth(1) and the bash completion cover ${#commands[@]} commands: ${commands[*]}"
exit $fail
