#!/usr/bin/env bash
# sdsandbox.sh - boot a REAL systemd as PID 1 of private namespaces, for tests
# that must talk to systemd over D-Bus on hosts where systemd is not PID 1.
#
#   sdsandbox.sh start NAME [--minimal] [--no-dbus] [--multi-user] [--keep-units]
#                  [--private-network] [--timeout SECS]
#                  # --private-network: a network namespace of its own (systemd brings up
#                  # its loopback), so several sandboxes serve the same port, as hosts do
#                  # --multi-user: the boot target also wants multi-user.target, so units
#                  # enabled with WantedBy=multi-user.target start at boot, as on a host
#                  # --keep-units: boot over the units dir a stopped sandbox NAME left (a reboot:
#                  # /etc/systemd/system persists, /run is fresh); the boot target is renewed
#   sdsandbox.sh env   NAME      # print shell-sourceable variables
#   sdsandbox.sh wait  NAME      # wait until SystemState is running/degraded
#   sdsandbox.sh exec  NAME CMD...   # run CMD inside the sandbox (all namespaces)
#   sdsandbox.sh pidns-exec NAME CMD...  # run CMD in the sandbox pid ns only
#                                        # (needed to use /run/systemd/private)
#   sdsandbox.sh stop  NAME [--save-journal]  # SIGKILL PID 1, verify, clean up
#   sdsandbox.sh stop-all [--orphans] [--prune]  # stop every sandbox under $SDSB_BASE
#                  # --orphans: only those whose owner died; --prune: then delete the state
#                  # dirs (saved journals...) of stopped sandboxes whose owner is gone
#
# berth's copy of shared/reference/sdsandbox.sh. Same recipe and safety properties; changes:
#  1. `start` refuses a host without a non-empty /etc/machine-id (PID 1 would otherwise create
#     and write the HOST's /etc/machine-id, which is shared with the sandbox).
#  2. `start` cleans up after itself when it fails before PID 1 is found (kills the unshare
#     launcher, removes the fresh cgroup), and when PID 1 dies or the boot times out the state
#     files stay so `stop NAME` still tears it down (the C++ harness always calls it).
#  3. The PID-reuse guard in `stop` matches the exact cgroup ("0::/sdsandbox.t1" or below it),
#     not a substring (sandbox t1 no longer matches a process of sandbox t10).
#  4. Owner tracking: with SDSB_OWNER=PID set, `start` records the owner's pid + start time in
#     $SDSB_BASE/NAME/owner (before the pid file); `stop-all --orphans` skips sandboxes whose owner
#     is still alive, so a CTest cleanup fixture cannot kill the sandbox of a test that is still
#     running; `stop-all --prune` also deletes state dirs left by earlier runs. A `start` whose
#     owner died meanwhile stops its sandbox itself (the owner's orphans may have been swept
#     before its pid file existed).
#  5. `stop` also removes $SDSB_BASE/NAME/journal from an earlier stop before --save-journal.
#  6. The pid-namespace check in `stop` ignores zombies (see pidns_live_procs) instead of waiting
#     2 s and failing on a dead process the host's PID 1 has not reaped yet.
#  7. The usage text lists stop-all's options.
#  8. `start --multi-user` and `start --keep-units` (see above), to test what a reboot brings up.
#     multi-user.target pulls in nothing of the host: every distro unit in a .wants dir is
#     masked (deny by default) and the host's /etc/systemd/system is not visible, so only
#     targets and the units enabled in the sandbox's own units dir start.
#  9. `start --private-network` (see above); `exec` then enters that network namespace too.
#
# Host side layout (SDSB_BASE defaults to /tmp/sdsandbox; tests pass their own):
#   $SDSB_BASE/NAME/units/    bind-mounted over /etc/systemd/system inside;
#                             tests write unit files HERE (plain host path)
#   $SDSB_BASE/NAME/pid       host PID of the sandbox's PID 1 (systemd)
#   $SDSB_BASE/NAME/env       SDSB_* variables (address of the D-Bus sockets...)
#   $SDSB_BASE/NAME/owner     "PID STARTTIME" of the process that started it (if SDSB_OWNER)
#   $SDSB_BASE/NAME/console.log  stdout/stderr of the launcher
#   $SDSB_BASE/NAME/journal/  the sandbox journal, after `stop NAME --save-journal`
# Sandbox PID 1 runs in new pid+mount+uts+ipc+cgroup namespaces, shares the
# host network namespace (services on 127.0.0.1 are reachable from outside) and
# the host file system except: /run (fresh tmpfs), /etc/systemd/system (bind of
# units/), /sys/fs/cgroup (fresh cgroup2 rooted at a dedicated cgroup),
# /proc/sys and /sys (read-only), generator dirs (hidden) and /dev/console
# (bound to /dev/null so PID 1 never scribbles on the host console).
set -euo pipefail

SDSB_BASE=${SDSB_BASE:-/tmp/sdsandbox}
SYSTEMD_BIN=${SYSTEMD_BIN:-/lib/systemd/systemd}

die() { echo "sdsandbox: $*" >&2; exit 1; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN{printf "%.3f", b-a}'; }

check_name() {
  [[ ${1:-} =~ ^[A-Za-z0-9_-]{1,32}$ ]] || die "bad sandbox name '${1:-}'"
}

cgroup_v2_base() {
  # Where is a cgroup2 hierarchy mounted on the host? (unified or hybrid)
  if [[ $(stat -fc %T /sys/fs/cgroup) == cgroup2fs ]]; then echo /sys/fs/cgroup
  elif [[ -d /sys/fs/cgroup/unified && $(stat -fc %T /sys/fs/cgroup/unified) == cgroup2fs ]]; then
    echo /sys/fs/cgroup/unified
  else die "no cgroup2 hierarchy found (pure cgroup v1 hosts are not supported)"; fi
}

# Units that would touch state SHARED with the host (same kernel, same /tmp,
# /var, /etc, /dev, console) if they ever got pulled in, e.g. through
# sysinit.target, which every unit with DefaultDependencies=yes Requires=.
STATIC_MASKS=(
  systemd-tmpfiles-setup.service systemd-tmpfiles-setup-dev.service
  systemd-tmpfiles-clean.service systemd-tmpfiles-clean.timer
  systemd-sysctl.service systemd-modules-load.service kmod-static-nodes.service
  systemd-binfmt.service proc-sys-fs-binfmt_misc.automount proc-sys-fs-binfmt_misc.mount
  systemd-sysusers.service systemd-firstboot.service systemd-machine-id-commit.service
  systemd-random-seed.service systemd-update-utmp.service systemd-update-utmp-runlevel.service
  systemd-journal-flush.service systemd-journald-audit.socket systemd-journal-catalog-update.service
  systemd-update-done.service systemd-hwdb-update.service ldconfig.service
  systemd-remount-fs.service systemd-fsck-root.service systemd-fsck@.service
  systemd-quotacheck.service quotaon.service systemd-pstore.service systemd-repart.service
  systemd-pcrphase.service systemd-pcrphase-sysinit.service systemd-pcrphase-initrd.service
  systemd-boot-system-token.service systemd-boot-update.service systemd-timesyncd.service
  systemd-udevd.service systemd-udev-trigger.service systemd-udev-settle.service
  systemd-udevd-control.socket systemd-udevd-kernel.socket
  systemd-ask-password-console.path systemd-ask-password-wall.path
  console-getty.service getty@.service serial-getty@.service container-getty@.service
  getty-static.service systemd-logind.service systemd-user-sessions.service
  emergency.service rescue.service
  dev-hugepages.mount dev-mqueue.mount sys-kernel-debug.mount sys-kernel-tracing.mount
  sys-kernel-config.mount sys-fs-fuse-connections.mount tmp.mount
  apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer e2scrub_reap.service
  fstrim.timer man-db.timer dpkg-db-backup.timer logrotate.timer
)
# Statically wanted units we DO want (journald for unit logs, dbus system bus)
KEEP_RE='^(systemd-journald\.service|systemd-journald\.socket|systemd-journald-dev-log\.socket|dbus\.socket|dbus\.service|systemd-initctl\.socket)$'

build_units_template() {
  local u=$1 minimal=$2 dbus=$3 multi_user=$4 n
  mkdir -p "$u"
  # Deny by default: mask everything the distro wires statically into any
  # .wants/.requires dir, except the allow-list above.
  {
    printf '%s\n' "${STATIC_MASKS[@]}"
    for d in /usr/lib/systemd/system /lib/systemd/system; do
      [[ -d $d ]] || continue
      find "$d" -mindepth 2 -maxdepth 2 \( -path '*.wants/*' -o -path '*.requires/*' \) -printf '%f\n'
    done
  } | sort -u | grep -Ev "$KEEP_RE" | grep -Ev '\.(target|slice)$' | while read -r n; do
    ln -sfn /dev/null "$u/$n"
  done

  local wants=""
  if [[ $dbus == 1 ]]; then wants+=" dbus.socket dbus.service"; fi
  if [[ $multi_user == 1 ]]; then wants+=" multi-user.target"; fi
  if [[ $minimal == 1 ]]; then
    cat >"$u/sdsandbox.target" <<EOF
[Unit]
Description=sdsandbox minimal boot target (no sysinit/basic)
DefaultDependencies=no
Wants=${wants# }
After=${wants# }
AllowIsolate=yes
EOF
  else
    cat >"$u/sdsandbox.target" <<EOF
[Unit]
Description=sdsandbox boot target (basic.target + journald + dbus)
Requires=basic.target
Wants=systemd-journald.service${wants}
After=basic.target systemd-journald.service${wants}
AllowIsolate=yes
EOF
  fi
  ln -sfn sdsandbox.target "$u/default.target"
}

# Building ~70 mask symlinks costs ~85 ms (one ln per link); build once per
# (options, distro unit set) and copy the template (~5 ms) for every sandbox.
write_units_dir() {
  local u=$1 minimal=$2 dbus=$3 multi_user=$4 key tpl
  key=$( { echo "$minimal$dbus$multi_user ${STATIC_MASKS[*]} $KEEP_RE"; declare -f build_units_template
           ls -d /usr/lib/systemd/system/*.wants/* /lib/systemd/system/*.wants/* 2>/dev/null; } | md5sum | cut -c1-12)
  tpl=$SDSB_BASE/.units-template.$key
  if [[ ! -d $tpl ]]; then
    build_units_template "$tpl.tmp.$$" "$minimal" "$dbus" "$multi_user"
    mv -T "$tpl.tmp.$$" "$tpl" 2>/dev/null || rm -rf "$tpl.tmp.$$"   # lost a race: fine
  fi
  if [[ -d $u ]]; then cp -a "$tpl/." "$u/"   # --keep-units: renew masks and boot target only
  else cp -a "$tpl" "$u"; fi
}

# Stage 1 runs as PID 1 of the new pid+mount namespace, still in the host cgroup
# namespace: move itself into the dedicated cgroup, then unshare the cgroup ns
# (without fork, so it stays PID 1) so that cgroup becomes the namespace root.
STAGE1='set -e; echo 0 >"$SDSB_CG/cgroup.procs"; exec unshare --cgroup /bin/sh -c "$SDSB_STAGE2"'
# Stage 2: private mounts, then exec systemd (same PID 1).
STAGE2='set -e
mount -t tmpfs -o mode=0755,nosuid,nodev tmpfs /run
mkdir -p /run/systemd/system.conf.d /run/systemd/journald.conf.d /run/sdsandbox
printf "[Manager]\nShowStatus=no\nRuntimeWatchdogSec=off\nRebootWatchdogSec=off\nKExecWatchdogSec=off\nWatchdogDevice=\n" \
  >/run/systemd/system.conf.d/50-sdsandbox.conf
printf "[Journal]\nStorage=volatile\nReadKMsg=no\nForwardToConsole=no\nForwardToWall=no\n" \
  >/run/systemd/journald.conf.d/50-sdsandbox.conf
mount --bind "$SDSB_DIR/units" /etc/systemd/system
if [ -e /dev/console ]; then mount --bind /dev/null /dev/console; fi
for g in /usr/lib/systemd/system-generators /lib/systemd/system-generators /etc/systemd/system-generators /usr/local/lib/systemd/system-generators; do
  if [ -d "$g" ] && ! mountpoint -q "$g"; then mount -t tmpfs -o ro,mode=0755 tmpfs "$g" 2>/dev/null || true; fi
done
mount --bind /proc/sys /proc/sys && mount -o remount,bind,ro /proc/sys
mount -o remount,bind,ro /sys || echo "warning: could not make /sys read-only" >&2
mount -t cgroup2 -o nosuid,nodev,noexec cgroup2 /sys/fs/cgroup
exec env -i container=sdsandbox TERM=dumb "$SDSB_SYSTEMD" --system --unit=sdsandbox.target --log-target=journal --log-level=info --show-status=no
'

cmd_start() {
  local name=$1; shift; check_name "$name"
  local minimal=0 dbus=1 multi_user=0 keep_units=0 timeout=30 net=""
  while (($#)); do case $1 in
    --minimal) minimal=1;; --no-dbus) dbus=0;; --timeout) timeout=$2; shift;;
    --multi-user) multi_user=1;; --keep-units) keep_units=1;; --private-network) net=--net;;
    *) die "unknown option $1";; esac; shift; done
  [[ $minimal == 1 && $multi_user == 1 ]] && die "--multi-user needs basic.target: not with --minimal"
  [[ $EUID == 0 ]] || die "must run as root"
  # systemd creates and writes /etc/machine-id when it is missing or empty; /etc is the host's.
  [[ -s /etc/machine-id ]] || die "/etc/machine-id is missing or empty: run systemd-machine-id-setup on the host first"
  local dir=$SDSB_BASE/$name t0; t0=$(now)
  if [[ -f $dir/pid ]] && kill -0 "$(cat "$dir/pid")" 2>/dev/null; then die "sandbox $name already running"; fi
  if [[ $keep_units == 1 ]]; then   # a reboot: everything but the units dir goes
    [[ -d $dir/units ]] || die "--keep-units: no units dir $dir/units to boot over"
    [[ ! -f $dir/pid ]] || die "--keep-units: sandbox $name was not stopped (stop it first)"
    find "$dir" -mindepth 1 -maxdepth 1 ! -name units -exec rm -rf {} +
  else
    rm -rf "$dir"; mkdir -p "$dir"
  fi
  # before the pid file exists: stop-all --orphans must never see a pid without its owner
  if [[ -n ${SDSB_OWNER:-} ]]; then echo "$SDSB_OWNER $(start_time "$SDSB_OWNER")" >"$dir/owner"; fi
  write_units_dir "$dir/units" "$minimal" "$dbus" "$multi_user"

  local cgbase cg; cgbase=$(cgroup_v2_base); cg=$cgbase/sdsandbox.$name
  if [[ -d $cg ]]; then
    # leftover from a previous run: must be empty, remove it bottom-up
    [[ -z $(find "$cg" -name cgroup.procs -exec cat {} + 2>/dev/null) ]] || die "cgroup $cg still has processes"
    find "$cg" -depth -type d -exec rmdir {} \;
  fi
  mkdir "$cg"

  # Launch. setsid: own session so the sandbox survives this shell; in a
  # non-interactive script the background job is not a group leader, so setsid
  # does not fork and $! is the unshare process itself.
  ( exec </dev/null >>"$dir/console.log" 2>&1
    export SDSB_DIR=$dir SDSB_CG=$cg SDSB_STAGE2=$STAGE2 SDSB_SYSTEMD=$SYSTEMD_BIN
    exec setsid unshare --pid --fork --kill-child=KILL --mount --uts --ipc $net --propagation private --mount-proc \
         /bin/sh -c "$STAGE1" ) &
  local upid=$! pid="" i
  for ((i = 0; i < 500; i++)); do
    pid=$(cat "/proc/$upid/task/$upid/children" 2>/dev/null || true); pid=${pid%% *}
    [[ -n $pid ]] && break; sleep 0.01
  done
  if [[ -z $pid ]]; then   # undo: --kill-child=KILL takes a half-started child down with unshare
    kill -KILL "$upid" 2>/dev/null || true
    for ((i = 0; i < 200; i++)); do
      [[ -z $(find "$cg" -name cgroup.procs -exec cat {} + 2>/dev/null) ]] && break; sleep 0.01
    done
    find "$cg" -depth -type d -exec rmdir {} \; 2>/dev/null || true
    die "could not find sandbox PID 1 (see $dir/console.log)"
  fi
  echo "$pid" >"$dir/pid"; echo "$upid" >"$dir/unshare.pid"; echo "$cg" >"$dir/cgroup"
  cat >"$dir/env" <<EOF
SDSB_NAME=$name
SDSB_PID=$pid
SDSB_ROOT=/proc/$pid/root
SDSB_UNITS=$dir/units
SDSB_CGROUP=$cg
SDSB_PRIVATE_ADDRESS=unix:path=/proc/$pid/root/run/systemd/private
SDSB_SYSTEM_BUS_ADDRESS=unix:path=/proc/$pid/root/run/dbus/system_bus_socket
EOF
  echo "launched: pid=$pid (unshare=$upid) in $(elapsed "$t0")s"
  cmd_wait "$name" "$timeout" "$dbus"
  # An owner that died while we booted may have had its orphans stopped before our pid file
  # existed: nobody else would stop this one.
  if [[ -n ${SDSB_OWNER:-} ]] && ! owner_alive "$dir"; then
    cmd_stop_sub "$name" || true
    die "owner $SDSB_OWNER went away during start; sandbox $name stopped again"
  fi
}

cmd_wait() {
  local name=$1 timeout=${2:-30} dbus=${3:-0} dir=$SDSB_BASE/$1 pid t0 st=""; t0=$(now)
  pid=$(cat "$dir/pid")
  # 1. cheap poll (no fork) until PID 1 has created its private API socket
  until [[ -S /proc/$pid/root/run/systemd/private ]]; do
    kill -0 "$pid" 2>/dev/null || die "sandbox PID 1 ($pid) died; see $dir/console.log"
    awk -v a="$t0" -v b="$(now)" -v t="$timeout" 'BEGIN{exit !(b-a>t)}' && die "timeout waiting for /run/systemd/private"
    sleep 0.005
  done
  # 2. let systemctl (inside: it needs the pid ns for the private socket) block until
  #    the boot transaction is done: prints running, degraded, maintenance, ...
  st=$(timeout "$timeout" nsenter -t "$pid" -m -p -- systemctl is-system-running --wait 2>/dev/null || true)
  case $st in running|degraded) ;; *) die "boot did not complete: state='$st' (see $dir/console.log)";; esac
  echo "system state: $st after $(elapsed "$t0")s"
  if [[ $dbus == 1 ]]; then
    # PID 1 attaches to the system bus asynchronously after dbus.service is up
    while ! busctl --address="unix:path=/proc/$pid/root/run/dbus/system_bus_socket" \
          status org.freedesktop.systemd1 >/dev/null 2>&1; do
      awk -v a="$t0" -v b="$(now)" -v t="$timeout" 'BEGIN{exit !(b-a>t)}' && die "timeout waiting for systemd on the system bus"
      sleep 0.01
    done
    echo "org.freedesktop.systemd1 on system bus after $(elapsed "$t0")s"
  fi
}

start_time() {   # field 22 of /proc/PID/stat (after the ")" that ends comm)
  local s f; s=$(cat "/proc/$1/stat" 2>/dev/null) || { echo 0; return; }
  s=${s##*) }; read -ra f <<<"$s"; echo "${f[19]:-0}"
}

in_own_cgroup() {   # is process $1 in cgroup $2 (host path) or below it?
  local rel=${2#"$(cgroup_v2_base)"} line
  while IFS= read -r line; do
    [[ $line == "0::$rel" || $line == "0::$rel/"* ]] && return 0
  done <"/proc/$1/cgroup"
  return 1
} 2>/dev/null

# Host PIDs of the processes in pid namespace $1 ("pid:[INODE]") that are not zombies. A process
# that entered with nsenter -p and lost its nsenter parent is re-parented to the HOST's PID 1 (the
# reaper is chosen in the parent's namespace); killed with the sandbox it stays a zombie until the
# host's PID 1 reaps it, which a container's init may do late or never. It holds nothing but a pid.
pidns_live_procs() {
  local f p s
  while IFS= read -r f; do
    p=${f#/proc/}; p=${p%%/*}
    s=$(cat "/proc/$p/stat" 2>/dev/null) || continue
    s=${s##*) }
    [[ ${s:0:1} == [ZX] ]] || echo "$p"
  done < <(find /proc -mindepth 3 -maxdepth 3 -path '/proc/[0-9]*/ns/pid' -lname "${1//[/\\[}" 2>/dev/null || true)
}

cmd_env() { check_name "$1"; cat "$SDSB_BASE/$1/env"; }

cmd_exec() {     # fully inside: sandbox mount ns (its /run, /etc/systemd/system), pid ns...
  local name=$1; shift; check_name "$name"
  local pid; pid=$(cat "$SDSB_BASE/$name/pid")
  local net=()   # its own network namespace, when it has one (--private-network)
  [[ $(readlink "/proc/$pid/ns/net") == "$(readlink /proc/self/ns/net)" ]] || net=(-n)
  exec nsenter -t "$pid" -m -p -u -i -C "${net[@]}" -- "$@"
}

cmd_pidns_exec() {  # only the pid ns: host file system view, but PID 1 can see our PID,
  # so the private socket $SDSB_PRIVATE_ADDRESS (peer-credential checked) accepts us
  local name=$1; shift; check_name "$name"
  exec nsenter -t "$(cat "$SDSB_BASE/$name/pid")" -p -- "$@"
}

cmd_stop() {
  local name=$1; check_name "$name"; shift
  local dir=$SDSB_BASE/$name pid cg t0 i; t0=$(now)
  [[ -f $dir/pid ]] || die "no sandbox $name"
  pid=$(cat "$dir/pid"); cg=$(cat "$dir/cgroup")
  if [[ ${1:-} == --save-journal ]]; then   # /run dies with the sandbox: keep logs for post-mortem
    rm -rf "$dir/journal"
    cp -r "/proc/$pid/root/run/log/journal" "$dir/journal" 2>/dev/null || true
  fi
  # Only kill the PID we started, and only if it still is a systemd in our cgroup
  local pidns=""
  if kill -0 "$pid" 2>/dev/null && in_own_cgroup "$pid" "$cg"; then
    pidns=$(readlink "/proc/$pid/ns/pid")
    kill -KILL "$pid"   # kernel then SIGKILLs every process of the pid namespace
  fi
  for ((i = 0; i < 500; i++)); do   # wait until the cgroup tree is empty
    [[ -z $(find "$cg" -name cgroup.procs -exec cat {} + 2>/dev/null) ]] && break; sleep 0.01
  done
  local left; left=$( (find "$cg" -name cgroup.procs -exec cat {} + 2>/dev/null || true) | wc -l)
  [[ $left == 0 ]] || die "$left processes still in $cg"
  if [[ -n $pidns ]]; then   # also catches processes that entered via nsenter -p (not in our cgroup)
    for ((i = 0; i < 200; i++)); do
      left=$(pidns_live_procs "$pidns" | wc -l)
      [[ $left == 0 ]] && break; sleep 0.01
    done
    [[ $left == 0 ]] || die "$left processes still in pid namespace $pidns"
  fi
  find "$cg" -depth -type d -exec rmdir {} \; 2>/dev/null || true
  [[ ! -d $cg ]] || die "could not remove $cg"
  local upid; upid=$(cat "$dir/unshare.pid" 2>/dev/null || true)
  for ((i = 0; i < 200; i++)); do   # the unshare parent exits once its child is gone
    [[ -n $upid ]] && grep -qs unshare "/proc/$upid/cmdline" || break; sleep 0.01
  done
  rm -f "$dir/pid" "$dir/unshare.pid"
  echo "stopped $name in $(elapsed "$t0")s (no processes left, cgroup removed)"
}

owner_alive() {   # does $1/owner name a process that is still running (same start time)?
  local o="" st=""
  [[ -f $1/owner ]] || return 1
  read -r o st <"$1/owner" || true
  [[ -n $o ]] && kill -0 "$o" 2>/dev/null && [[ $(start_time "$o") == "$st" ]]
}

cmd_stop_all() {   # CI safety net (e.g. in a trap): stop every sandbox recorded under $SDSB_BASE
  local f rc=0 orphans=0 prune=0 d
  while (($#)); do case $1 in
    --orphans) orphans=1;; --prune) prune=1;; *) die "unknown option $1";; esac; shift; done
  for f in "$SDSB_BASE"/*/pid; do [[ -f $f ]] || continue
    d=$(dirname "$f")
    if [[ $orphans == 1 ]] && owner_alive "$d"; then
      echo "skipping $(basename "$d"): owner $(cut -d' ' -f1 "$d/owner") still running"; continue
    fi
    cmd_stop_sub "$(basename "$d")" || rc=1; done
  if [[ $prune == 1 ]]; then   # state dirs of stopped sandboxes (kept journals) whose owner is gone
    for d in "$SDSB_BASE"/*/; do d=${d%/}
      [[ -d $d && ! -f $d/pid ]] && ! owner_alive "$d" || continue
      [[ $(basename "$d") =~ ^[A-Za-z0-9_-]{1,32}$ ]] && rm -rf "$d"   # only sandbox dirs
    done
  fi
  return $rc
}
cmd_stop_sub() { ( cmd_stop "$@" ); }   # subshell: a die() in one stop must not abort the loop

case ${1:-} in
  start) shift; cmd_start "$@";;
  stop-all) shift; cmd_stop_all "$@";;
  wait) shift; check_name "$1"; cmd_wait "$1" "${2:-30}" 0;;
  env) shift; cmd_env "$@";;
  exec) shift; cmd_exec "$@";;
  pidns-exec) shift; cmd_pidns_exec "$@";;
  stop) shift; cmd_stop "$@";;
  *) sed -n '2,18p' "$0"; exit 2;;
esac
