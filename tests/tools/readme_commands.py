#!/usr/bin/python3
"""Every command README.md shows, run as printed against the parts of this build.

  readme_commands.py SOURCE_DIR BUILD_DIR [--readme FILE]   (CTest: readme_commands)

The commands come from README.md itself (or --readme FILE: try it on an edited copy):
- each line of a fenced block that starts with a command (berth, build/berth, .ci/..., cmake,
  ctest, cpack, sudo, cd, source, systemctl, man), or a `$ ` line of a block that shows output;
- each inline `berth ...`, `systemctl ...`, `man ...`, `source ...`, `sudo ...` span.
A command is run as printed (one bash -c of its text) when a scenario below claims it, in a
world made of real parts: berth from BUILD_DIR as `berth` on PATH, the bundled examples, the
fake Hub (tests/fake_hub) as HF_ENDPOINT, a sandboxed systemd (tests/sandbox/sdsandbox.sh) as
the system bus and fake vLLM servers (tests/fake_vllm). The part of a `&&` chain that cannot run
in a test is in NOT_RUN with the reason, printed each time, and replaced by a check that its
parts exist. A synopsis ([optional] parts, PLACEHOLDERS) and an inline fragment are checked
instead: the subcommand exists and `berth SUBCOMMAND --help` lists every flag it names. A fenced
command that no scenario claims and NOT_RUN does not name fails the test.
"""

import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))

# Parts of `&&` chains (and inline commands) that are not run: why, and what runs instead to
# show that the command parses and its parts exist ("" when nothing can stand in for it).
NOT_RUN = {
    "cmake -S . -B build -G Ninja -DBUILD_TESTING=OFF": (
        "configures the build directory this test runs from, without its tests; instead the "
        "source tree is configured the same way into a scratch directory",
        'cmake -S . -B "$SCRATCH/configure-berth" -G Ninja -DBUILD_TESTING=OFF >/dev/null'),
    "cmake -S . -B build -G Ninja -DBUILD_TESTING=ON": (
        "configures the build directory this test runs from (it was made by this command); "
        "instead the source tree is configured the same way into a scratch directory",
        'cmake -S . -B "$SCRATCH/configure" -G Ninja -DBUILD_TESTING=ON >/dev/null'),
    "cmake --build build": (
        "builds the tree this test is part of: berth, the test binaries and this test exist "
        "because it ran; instead the build directory must hold a ninja build with berth",
        "test -f build/build.ninja && test -x build/berth"),
    "ctest --test-dir build --output-on-failure -j2": (
        "runs every test of the build, this one among them; instead it lists them (-N)",
        "ctest --test-dir build --output-on-failure -j2 -N >/dev/null"),
    "sudo apt install ./berth_*.deb": (
        "installs the package into this machine's /usr (the CI host does it); instead the glob "
        "must name exactly one .deb that dpkg-deb reads",
        'set -- ./berth_*.deb && [ $# -eq 1 ] && dpkg-deb --info "$1" >/dev/null'),
    "systemctl enable --now berth": (
        "starts berth's own daemon on the host, on /etc/berth; the unit is checked by "
        "install_check (ExecStart= names the installed berth) and the loop by tests/loop", ""),
    "systemctl enable --now berth-reconcile.timer": (
        "starts berth's own timer on the host, on /etc/berth; see install_check and tests/loop",
        ""),
    "systemctl reload berth": ("signals the host's berth daemon (SIGHUP: tests/loop)", ""),
    "systemctl status berth": ("asks the host's systemd about its berth daemon", ""),
    "systemctl enable": ("a fragment: berth's enable through systemd's D-Bus API "
                         "(tests/e2e boot_test)", ""),
    "berth reconcile --once -f /etc/berth": (
        "the timer unit's command, on the host's /etc/berth (its flags are checked below; "
        "reconcile --once runs in tests/loop)", ""),
}

# Blocks that show output, not commands: their first line, and where the output is checked.
OUTPUT_BLOCKS = {
    "berth plan for host ": "the output of `build/berth plan ...` above: compared with it below",
}

# The scenarios and the README commands each runs, in order: (regex on the command, check).
# The check runs after the command in the same shell and must succeed too.
CHECKOUT = [
    (r"^\.ci/setup && .* && build/berth plan ", None),
    (r"^\.ci/setup --tests && .* && ctest ", None),
    (r"^sudo cmake --install build\s*(#|$)", 'test -x "$DESTDIR/usr/local/bin/berth"'),
    (r"^sudo cmake --install build --prefix /usr\b", 'test -x "$DESTDIR/usr/bin/berth"'),
    (r"^man berth$", None),
    (r"^cd build && cpack ", None),
    (r"^source <\(berth completion bash\)$", "complete -p berth >/dev/null"),
    (r"^berth --version$", None),
]
BENCH = [
    (r"^berth bench vllm-kimi-k25 -f berth\.yaml\b", None),
    (r"^berth bench --compare$", None),
]
HOST = [
    (r"^berth observe .*> host\.json$", "python3 -c 'import json; json.load(open(\"host.json\"))'"),
    (r"^berth plan -f manifests/ --observed host\.json .*--out plan\.json", "test -s plan.json"),
    (r"^berth apply plan\.json\b", "python3 -c \"import urllib.request, os; urllib.request."
     "urlopen('http://127.0.0.1:%s/health' % os.environ['PORT'], timeout=5)\""),
    (r"^berth --log-level debug plan -f m$", None),
    (r"^berth plan -f m --log-level debug$", None),
]

FLEET = [
    (r"^berth validate -f manifests/examples/fleet$", None),
    (r"^berth fleet status -f manifests/examples/fleet$", None),
]

STARTERS = re.compile(r"^(\$ )?(berth|build/berth|\.ci/\S+|cmake|ctest|cpack|sudo|cd|source|"
                      r"systemctl|man)(\s|$)")
INLINE = re.compile(r"^(berth|systemctl|man|source|sudo)\s")
PLACEHOLDER = re.compile(r"\[|\]|…|\.\.\.|\||(^|\s)[A-Z][A-Z_]*(\s|$|…)")


class Command:
    def __init__(self, line, text, inline, output=None):
        self.line, self.text, self.inline, self.output = line, text, inline, output

    def where(self):
        return "README.md:%d%s" % (self.line, " (inline)" if self.inline else "")


def strip_comment(part):
    return re.sub(r"\s+#.*$", "", part).strip()


def parse_readme(text):
    """The commands of README.md: fenced lines and inline spans, with their line numbers."""
    commands, lines = [], text.split("\n")
    i = 0
    prose = []  # (line number, text) outside fences
    while i < len(lines):
        if not lines[i].startswith("```"):
            prose.append((i + 1, lines[i]))
            i += 1
            continue
        lang, start = lines[i][3:].strip(), i + 1
        i += 1
        block = []
        while i < len(lines) and not lines[i].startswith("```"):
            block.append((i + 1, lines[i]))
            i += 1
        i += 1
        if lang not in ("", "sh", "bash", "console") or not block:
            continue
        if any(block[0][1].startswith(k) for k in OUTPUT_BLOCKS):
            continue
        if any(l.startswith("$ ") for _, l in block):
            cur = None
            for n, l in block:
                if l.startswith("$ "):
                    cur = Command(n, l[2:].strip(), False, [])
                    commands.append(cur)
                elif cur:
                    cur.output.append(l)
            continue
        cur = None
        for n, l in block:
            if STARTERS.match(l):
                cur = Command(n, l.strip(), False)
                commands.append(cur)
            elif cur and l[:1].isspace() and l.strip():
                cur.text += " " + l.strip()  # a synopsis continued on the next line
            else:
                cur = None
    # Inline spans, also those wrapped over two lines.
    joined, starts = "", []
    for n, l in prose:
        starts.append((len(joined), n))
        joined += l + "\n"
    for m in re.finditer(r"`([^`]+)`", joined):
        span = re.sub(r"\s*\n\s*", " ", m.group(1)).strip()
        if INLINE.match(span):
            n = max(ln for off, ln in starts if off <= m.start())
            commands.append(Command(n, span, True))
    return commands


def block_after(text, heading):
    """The first fenced block after `heading`, as text."""
    part = text.split(heading, 1)[1]
    return part.split("```\n", 2)[1].rstrip("\n") if "```" in part else ""


class Runner:
    def __init__(self, source, build, readme):
        self.source, self.build, self.readme = source, build, readme
        self.berth = os.path.join(build, "berth")
        self.failures, self.ran, self.checked, self.not_run = [], [], [], []
        self.tmp = tempfile.mkdtemp(prefix="berth-readme-")
        self.bin = os.path.join(self.tmp, "bin")
        os.makedirs(self.bin)
        os.symlink(self.berth, os.path.join(self.bin, "berth"))
        # sudo runs the command as this user (the test's writes go under DESTDIR or $SCRATCH);
        # apt-get only says what .ci/setup would install.
        self.script("sudo", 'exec "$@"\n')
        self.script("apt-get", 'echo "apt-get (test stub, nothing installed): $*" >&2\n')
        self.env = dict(os.environ, PATH=self.bin + ":" + os.environ.get("PATH", ""),
                        HF_HOME=os.path.join(self.tmp, "hf-home"), SCRATCH=self.tmp,
                        BERTH_STATE_DIR=os.path.join(self.tmp, "state"))
        self.env.pop("HF_TOKEN", None)
        self.help = {}

    def script(self, name, body):
        path = os.path.join(self.bin, name)
        with open(path, "w") as f:
            f.write("#!/bin/sh\n" + body)
        os.chmod(path, 0o755)

    def fail(self, cmd, why):
        self.failures.append("%s: `%s`: %s" % (cmd.where(), cmd.text, why))
        print("FAIL  " + self.failures[-1])

    # --- synopses and fragments ----------------------------------------------------------
    def berth_help(self, sub):
        if sub not in self.help:
            args = [self.berth] + sub.split() + ["--help"]
            r = subprocess.run(args, capture_output=True, text=True, timeout=30)
            self.help[sub] = r.stdout + r.stderr if r.returncode == 0 else None
        return self.help[sub]

    def check_flags(self, cmd):
        words = cmd.text.replace("…", " ").split()
        if words[0] != "berth":
            return
        top = self.berth_help("")
        subs = set(re.findall(r"^\s{2,}([a-z]+)\s", top, re.M))
        at = next((i for i, w in enumerate(words) if i > 0 and w in subs), 0)
        sub = words[at] if at else ""
        if not sub and not words[1].startswith("-"):
            return  # prose that starts with berth's name (a log line), not a command
        # A command with subcommands of its own (berth fleet status): the deepest one named.
        while at + 1 < len(words) and self.berth_help(sub) is not None:
            nested = set(re.findall(r"^\s{2,}([a-z]+)\s", self.berth_help(sub), re.M))
            if words[at + 1] not in nested or "SUBCOMMAND" not in self.berth_help(sub):
                break
            at += 1
            sub += " " + words[at]
        flags = set()
        for w in words[1:]:
            for f in re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", w):
                flags.add(f)
        text = self.berth_help(sub)
        if text is None:
            return self.fail(cmd, "`berth %s --help` fails" % sub)
        missing = [f for f in sorted(flags)
                   if not re.search(r"(^|[\s,\[])%s([\s,=\]]|$)" % re.escape(f), text, re.M)]
        if missing:
            return self.fail(cmd, "`berth %s --help` does not list %s" % (sub, ", ".join(missing)))
        self.checked.append(cmd)

    # --- running -------------------------------------------------------------------------
    def stand_ins(self, cmd):
        """The command's text with each part in NOT_RUN replaced by its stand-in."""
        parts = [p.strip() for p in cmd.text.split(" && ")]
        out = []
        for p in parts:
            key = strip_comment(p)
            if key in NOT_RUN:
                why, instead = NOT_RUN[key]
                self.not_run.append((cmd, key, why))
                print("      not run: `%s`: %s" % (key, why))
                out.append(instead or "true")
            else:
                out.append(p if p is parts[-1] else key)
        return " && ".join(out)

    def run(self, cmd, cwd, env, check=None, exits=(0,)):
        script = self.stand_ins(cmd)
        if check:
            script = "%s\nrc=$?; [ $rc -eq 0 ] || exit $rc\n%s" % (script, check)
        print("RUN   %s: %s" % (cmd.where(), cmd.text))
        t0 = time.monotonic()
        # Its own process group, killed whole when it runs too long: nothing it started stays.
        p = subprocess.Popen(["bash", "-c", script], cwd=cwd, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            out, err = p.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, err = p.communicate()
        r = subprocess.CompletedProcess(p.args, p.returncode, out, err)
        if r.returncode not in exits:
            self.fail(cmd, "exit %d (wanted %s) in %.1fs\n--- stdout\n%s--- stderr\n%s"
                      % (r.returncode, "/".join(map(str, exits)), time.monotonic() - t0,
                         r.stdout[-3000:], r.stderr[-3000:]))
            return None
        print("      ok, exit %d in %.1fs" % (r.returncode, time.monotonic() - t0))
        self.ran.append(cmd)
        return r

    def claim(self, commands, scenario):
        """The README commands each pattern of a scenario claims, in the scenario's order."""
        claimed = []
        for pattern, check in scenario:
            hits = [c for c in commands if re.search(pattern, c.text)]
            if not hits:
                self.failures.append("README.md shows no command matching %s any more: update "
                                     "tests/tools/readme_commands.py" % pattern)
                print("FAIL  " + self.failures[-1])
            claimed += [(c, check) for c in hits]
        return claimed

    # --- scenarios -----------------------------------------------------------------------
    def link_checkout(self, name):
        """A folder under the scratch dir whose entries link to the source tree's (no build)."""
        root = os.path.join(self.tmp, name)
        os.makedirs(root)
        for entry in os.listdir(self.source):
            if entry not in ("build", ".git"):
                os.symlink(os.path.join(self.source, entry), os.path.join(root, entry))
        return root

    def checkout(self, claimed):
        """The repository's root: .ci, manifests and this build as build/."""
        root = self.link_checkout("checkout")
        os.symlink(self.build, os.path.join(root, "build"))
        debs_before = set(f for f in os.listdir(self.build) if f.endswith(".deb"))
        env = dict(self.env, MANPAGER="cat", PAGER="cat", MANWIDTH="100",
                   MANPATH=os.path.join(self.tmp, "root", "usr", "local", "share", "man"))
        try:
            for cmd, check in claimed:
                e = env
                if "cmake --install" in cmd.text:
                    e = dict(env, DESTDIR=os.path.join(self.tmp, "root"))
                r = self.run(cmd, root, e, check)
                if r and "build/berth plan" in cmd.text:
                    shown = block_after(self.readme, "## What the first command prints")
                    if r.stdout.rstrip("\n") != shown:
                        self.fail(cmd, "prints another plan than README's 'What the first "
                                  "command prints':\n" + r.stdout)
                if r and cmd.text == "man berth" and "berth plan" not in r.stdout:
                    self.fail(cmd, "the page has no section for berth plan:\n" + r.stdout[:2000])
        finally:
            for f in os.listdir(self.build):
                if f.endswith(".deb") and f not in debs_before:
                    os.remove(os.path.join(self.build, f))

    def bench(self, claimed):
        """One fake vLLM serving 'kimi' (40 tok/s a stream, 2000 in all) and berth.yaml."""
        work = os.path.join(self.tmp, "bench")
        model = os.path.join(work, "model")
        os.makedirs(work)
        subprocess.run(["python3", os.path.join(self.source, "tests/fake_vllm/make_model.py"),
                        model], check=True, stdout=subprocess.DEVNULL)
        port = free_port()
        fake = start(["python3", os.path.join(self.source, "tests/fake_vllm/fake_vllm.py"),
                      "serve", model, "--host", "127.0.0.1", "--port", str(port),
                      "--served-model-name", "kimi", "--tokens-per-second", "40",
                      "--max-aggregate-tokens-per-second", "2000"], work)
        try:
            wait_listening(port, fake)
            write(os.path.join(work, "berth.yaml"), BENCH_MANIFEST % {
                "store": os.path.join(work, "store"), "port": port})
            for cmd, check in claimed:
                r = self.run(cmd, work, self.env, check)
                if r and cmd.output:
                    self.compare_bench(cmd, r.stdout, port)
        finally:
            fake.kill()
            fake.wait()

    def compare_bench(self, cmd, got, port):
        """The output has the README's shape: its fixed lines, columns and row names."""
        want = [l for l in cmd.output if l.strip()]
        got_lines = [l for l in got.split("\n") if l.strip()]
        state = self.env["BERTH_STATE_DIR"]
        if cmd.text.startswith("berth bench --compare"):
            names = [re.split(r"\s{2,}", l)[0] for l in want if l != "..."]
            have = [re.split(r"\s{2,}", l)[0] for l in got_lines]
            lost = [n for n in names if n not in have]
            if lost:
                self.fail(cmd, "rows README shows are missing: %s\n%s" % (lost, got))
            return
        fixed = [want[0].replace("18201", str(port)), want[1], want[2],
                 want[-1].replace("/var/lib/berth", state)]
        for line in fixed:
            if line not in got_lines:
                self.fail(cmd, "README shows the line\n  %s\nwhich it does not print:\n%s"
                          % (line, got))
        levels = [l.split()[0] for l in want[3:-1]]
        if [l.split()[0] for l in got_lines[3:-1]] != levels:
            self.fail(cmd, "concurrency levels differ from README's %s:\n%s" % (levels, got))

    def host(self, claimed):
        """A sandboxed systemd, the fake Hub with org/chat, a checkout with manifests/."""
        sb = Sandbox(self.source, self.build)
        why = sb.start()
        if why:
            reason = "no systemd sandbox here: " + why
            if os.environ.get("BERTH_ALLOW_NO_SANDBOX") != "1":
                self.failures.append(reason)
                print("FAIL  " + reason)
                return
            for cmd, _ in claimed:
                self.not_run.append((cmd, cmd.text, reason + " (BERTH_ALLOW_NO_SANDBOX=1)"))
                print("      not run: `%s`: %s" % (cmd.text, reason))
            return
        hub = None
        try:
            work = os.path.join(self.tmp, "host")
            repos = os.path.join(work, "repos")
            subprocess.run(["python3", os.path.join(self.source, "tests/fake_vllm/make_model.py"),
                            os.path.join(repos, "org", "chat", "main")], check=True,
                           stdout=subprocess.DEVNULL)
            hub = start(["python3", os.path.join(self.source, "tests/fake_hub/fake_hub.py"),
                         "--repos", repos], work, stdout=subprocess.PIPE)
            api = json.loads(hub.stdout.readline())["api"]
            port = free_port()
            write(os.path.join(work, "manifests", "berth.yaml"), HOST_MANIFEST % {
                "store": os.path.join(work, "store"), "units": sb.units,
                "vllm": os.path.join(self.source, "tests/fake_vllm/fake_vllm.py"),
                "pkg": os.path.join(self.source, "tests/fake_vllm/pkg"),
                "port": port})
            os.symlink("manifests/berth.yaml", os.path.join(work, "m"))
            env = dict(self.env, HF_ENDPOINT=api, DBUS_SYSTEM_BUS_ADDRESS=sb.bus, PORT=str(port))
            for cmd, check in claimed:
                exits = (2,) if "--detailed-exitcode" in cmd.text else (0,)
                r = self.run(cmd, work, env, check, exits)
                if r and "--log-level debug" in cmd.text and "debug" not in r.stderr:
                    self.fail(cmd, "no debug log on stderr:\n" + r.stderr[-2000:])
        finally:
            if hub:
                hub.terminate()
                hub.wait()
            sb.stop()


    def fleet(self, claimed):
        """The checkout, and Debian's etcd on 127.0.0.1:2379, the example's endpoint."""
        root = self.link_checkout("fleet")
        etcd = shutil.which("etcd")
        if not etcd:
            self.failures.append("no etcd here (.ci/setup installs etcd-server)")
            print("FAIL  no etcd here")
            return
        with socket.socket() as s:
            busy = s.connect_ex(("127.0.0.1", 2379)) == 0
        proc = None
        if busy:
            print("      127.0.0.1:2379 answers already: the fleet commands ask that etcd")
        else:
            peer = free_port()
            proc = start([etcd, "--data-dir", os.path.join(root, "etcd-data"),
                          "--listen-client-urls", "http://127.0.0.1:2379",
                          "--advertise-client-urls", "http://127.0.0.1:2379",
                          "--listen-peer-urls", "http://127.0.0.1:%d" % peer,
                          "--initial-advertise-peer-urls", "http://127.0.0.1:%d" % peer,
                          "--initial-cluster", "default=http://127.0.0.1:%d" % peer], root)
        try:
            deadline = time.monotonic() + 30
            while True:  # etcd listens a moment before it serves
                try:
                    urllib.request.urlopen("http://127.0.0.1:2379/health", timeout=1).read()
                    break
                except OSError:
                    if time.monotonic() > deadline or (proc and proc.poll() is not None):
                        self.failures.append("etcd on 127.0.0.1:2379 does not serve")
                        print("FAIL  etcd on 127.0.0.1:2379 does not serve")
                        return
                    time.sleep(0.1)
            for cmd, check in claimed:
                r = self.run(cmd, root, self.env, check)
                if r and "fleet status" in cmd.text and not r.stdout.startswith(
                        "fleet prod-llm: "):
                    self.fail(cmd, "does not print the fleet's line:\n" + r.stdout)
        finally:
            if proc:
                proc.terminate()
                proc.wait()


BENCH_MANIFEST = """berth: 1
host:
  store: %(store)s
models:
  kimi-k25:
    source: hf://moonshotai/Kimi-K2.5
    revision: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa
    size: 1GB
services:
  vllm-kimi-k25:
    model: kimi-k25
    engine: vllm
    gpus: [0]
    port: %(port)d
    bind: 127.0.0.1
    vllm: {served_model_name: kimi}
"""

HOST_MANIFEST = """berth: 1
host:
  store: %(store)s
  unit_dir: %(units)s
  executables: {vllm: %(vllm)s}
models:
  chat: {source: hf://org/chat, revision: main}
services:
  chat:
    model: chat
    engine: vllm
    gpus: [0]
    port: %(port)d
    bind: 127.0.0.1
    health: {timeout: 60s, interval: 100ms}
    env: {PYTHONPATH: %(pkg)s}   # the fake vllm package, for berth's engine check
"""


class Sandbox:
    """tests/sandbox/sdsandbox.sh: a real systemd as PID 1 of private namespaces."""

    def __init__(self, source, build):
        self.sh = os.path.join(source, "tests/sandbox/sdsandbox.sh")
        self.name = "readme%d" % os.getpid()
        self.env = dict(os.environ, SDSB_BASE=os.path.join(build, "sandboxes"),
                        SDSB_OWNER=str(os.getpid()))
        self.started = False

    def start(self):
        if os.geteuid() != 0:
            return "not root"
        r = subprocess.run(["bash", self.sh, "start", self.name], env=self.env,
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            return "sdsandbox.sh start failed: " + r.stdout + r.stderr
        self.started = True
        e = dict(l.split("=", 1) for l in subprocess.run(
            ["bash", self.sh, "env", self.name], env=self.env, capture_output=True, text=True,
            check=True).stdout.split())
        self.bus, self.units = e["SDSB_SYSTEM_BUS_ADDRESS"], e["SDSB_UNITS"]
        return ""

    def stop(self):
        if self.started:
            subprocess.run(["bash", self.sh, "stop", self.name], env=self.env, check=False,
                           stdout=subprocess.DEVNULL)
            shutil.rmtree(os.path.join(self.env["SDSB_BASE"], self.name), ignore_errors=True)


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(argv, cwd, stdout=subprocess.DEVNULL):
    return subprocess.Popen(argv, cwd=cwd, stdout=stdout, stderr=subprocess.DEVNULL, text=True)


def wait_listening(port, proc):
    """Returns once the fake accepts connections (it listens after loading its model)."""
    deadline = time.monotonic() + 30
    while True:
        if proc.poll() is not None:
            raise SystemExit("fake vLLM on port %d exited with %d" % (port, proc.returncode))
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise SystemExit("fake vLLM did not listen on port %d" % port)
            time.sleep(0.05)


def main(argv):
    if len(argv) not in (3, 5) or (len(argv) == 5 and argv[3] != "--readme"):
        raise SystemExit(__doc__)
    if os.environ.get("BERTH_README_COMMANDS"):
        # A README command ran the tests again (ctest): this test must not run itself.
        raise SystemExit("readme_commands.py runs inside itself (a README command ran ctest?); "
                         "stopped so that it does not recurse")
    os.environ["BERTH_README_COMMANDS"] = "1"
    source, build = os.path.abspath(argv[1]), os.path.abspath(argv[2])
    path = argv[4] if len(argv) == 5 else os.path.join(source, "README.md")
    with open(path) as f:
        readme = f.read()
    runner = Runner(source, build, readme)
    commands = parse_readme(readme)
    print("%s: %d commands" % (path, len(commands)))
    try:
        scenarios = [("checkout", CHECKOUT, runner.checkout), ("bench", BENCH, runner.bench),
                     ("host", HOST, runner.host), ("fleet", FLEET, runner.fleet)]
        claimed_all = set()
        for name, scenario, fn in scenarios:
            claimed = runner.claim(commands, scenario)
            claimed_all.update(id(c) for c, _ in claimed)
            print("== scenario %s: %d commands" % (name, len(claimed)))
            fn(claimed)
        print("== the others")
        for cmd in commands:
            if id(cmd) in claimed_all:
                continue
            key = strip_comment(cmd.text)
            if key in NOT_RUN:
                runner.not_run.append((cmd, key, NOT_RUN[key][0]))
                print("NOT RUN %s: `%s`: %s" % (cmd.where(), key, NOT_RUN[key][0]))
                if key.startswith("berth "):
                    runner.check_flags(cmd)
            elif cmd.inline or PLACEHOLDER.search(cmd.text):
                runner.check_flags(cmd)  # a synopsis or a fragment: its flags exist
            else:
                runner.fail(cmd, "a command this test neither runs nor names in NOT_RUN: add "
                            "it to a scenario of tests/tools/readme_commands.py, or say why not")
    finally:
        shutil.rmtree(runner.tmp, ignore_errors=True)
    print("\nran %d as printed, checked the flags of %d, did not run %d:" % (
        len(runner.ran), len(runner.checked), len(runner.not_run)))
    for cmd, part, why in runner.not_run:
        print("  %s `%s`: %s" % (cmd.where(), part, why))
    if runner.failures:
        print("\n%d README command(s) do not work as printed:" % len(runner.failures))
        for f in runner.failures:
            print("  " + f.split("\n")[0])
        return 1
    print("every README command works as printed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
