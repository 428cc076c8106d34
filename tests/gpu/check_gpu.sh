#!/usr/bin/env bash
# Checks berth's GPU observation against the real driver, on a GPU machine (not run in CI; see
# shared/reference/gpu-machine.md: root, cgroup2 writable at /sys/fs/cgroup, torch, no systemd).
#
#   tests/gpu/check_gpu.sh BERTH_GPU_OBSERVE [GPU_INDEX [GIB]]
#
# 1. starts a python3 holding GIB GiB (default 20) with torch on GPU GPU_INDEX (default 0), and a
#    second one holding 1 GiB that stays outside any unit;
# 2. puts the first into /sys/fs/cgroup/system.slice/gpu-holder.service, which is what
#    /proc/PID/cgroup shows for a process that systemd started as gpu-holder.service;
# 3. runs BERTH_GPU_OBSERVE twice: through NVML, and with NVML made unloadable so that the
#    nvidia-smi fallback answers;
# 4. compares devices, memory and processes (pid, bytes, unit) with nvidia-smi (and pynvml when
#    present), printing one PASS/FAIL line per check;
# 5. kills the holders and removes the cgroup (also when interrupted).
# Exit status: 0 when every check passed, 1 when one failed, 2 when the check could not run.
set -euo pipefail

if [[ $# -lt 1 || $# -gt 3 ]]; then
  echo "usage: $0 BERTH_GPU_OBSERVE [GPU_INDEX [GIB]]" >&2
  exit 2
fi
BIN=$(realpath "$1")
GPU=${2:-0}
GIB=${3:-20}
UNIT=gpu-holder.service
SLICE=/sys/fs/cgroup/system.slice
CGROUP=$SLICE/$UNIT

die() {
  echo "check_gpu: $*" >&2
  exit 2
}
[[ -x $BIN ]] || die "$BIN is not an executable"
[[ $(id -u) == 0 ]] || die "must run as root (it creates a cgroup)"
command -v nvidia-smi >/dev/null || die "nvidia-smi not found"
command -v python3 >/dev/null || die "python3 not found"
[[ -w /sys/fs/cgroup/cgroup.procs ]] || die "/sys/fs/cgroup is not a writable cgroup2 mount"

UUID=$(nvidia-smi --query-gpu=index,uuid --format=csv,noheader |
  awk -F', ' -v i="$GPU" '$1 == i { print $2 }')
[[ -n $UUID ]] || die "no GPU with index $GPU"

WORK=$(mktemp -d /tmp/check_gpu.XXXXXX)
HOLDER=""
OUTSIDER=""
CREATED_SLICE=""
cleanup() {
  for pid in $HOLDER $OUTSIDER; do kill "$pid" 2>/dev/null || true; done
  for pid in $HOLDER $OUTSIDER; do wait "$pid" 2>/dev/null || true; done
  if [[ -d $CGROUP ]]; then rmdir "$CGROUP" 2>/dev/null || true; fi
  if [[ -n $CREATED_SLICE ]]; then rmdir "$SLICE" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 2' INT TERM

# A process that allocates GIB GiB on the GPU given by UUID, then says so in a file and waits.
HOLD='
import sys, time, torch
gib, ready = float(sys.argv[1]), sys.argv[2]
x = torch.empty(int(gib * 2**30), dtype=torch.uint8, device="cuda")
x.fill_(1)
torch.cuda.synchronize()
open(ready, "w").write("ready\n")
time.sleep(3600)
'
CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=$UUID \
  python3 -c "$HOLD" "$GIB" "$WORK/holder.ready" >"$WORK/holder.log" 2>&1 &
HOLDER=$!
CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=$UUID \
  python3 -c "$HOLD" 1 "$WORK/outsider.ready" >"$WORK/outsider.log" 2>&1 &
OUTSIDER=$!

[[ -d $SLICE ]] || { mkdir "$SLICE" && CREATED_SLICE=1; }
mkdir -p "$CGROUP"
echo "$HOLDER" >"$CGROUP/cgroup.procs"
echo "holder pid $HOLDER in $(cut -d: -f3- "/proc/$HOLDER/cgroup"), outsider pid $OUTSIDER" \
  "in $(cut -d: -f3- "/proc/$OUTSIDER/cgroup"); GPU $GPU = $UUID"

for _ in $(seq 300); do
  [[ -e $WORK/holder.ready && -e $WORK/outsider.ready ]] && break
  kill -0 "$HOLDER" 2>/dev/null || die "the holder died: $(tail -5 "$WORK/holder.log")"
  kill -0 "$OUTSIDER" 2>/dev/null || die "the outsider died: $(tail -5 "$WORK/outsider.log")"
  sleep 0.5
done
[[ -e $WORK/holder.ready && -e $WORK/outsider.ready ]] || die "the holders did not allocate in 150 s"
sleep 2

# What berth sees, through NVML and through the nvidia-smi fallback.
set +e
"$BIN" >"$WORK/nvml.json" 2>"$WORK/nvml.err"
NVML_RC=$?
"$BIN" --library "$WORK/none/libnvidia-ml.so.1" >"$WORK/smi.json" 2>"$WORK/smi.err"
SMI_RC=$?
set -e
# What the driver's own tool sees.
nvidia-smi --query-gpu=index,uuid,name,memory.total,memory.used,memory.free \
  --format=csv,noheader,nounits >"$WORK/gpus.csv"
nvidia-smi --query-compute-apps=gpu_uuid,pid,used_memory --format=csv,noheader,nounits \
  >"$WORK/apps.csv"
echo "--- berth (nvml), exit $NVML_RC"
cat "$WORK/nvml.json" "$WORK/nvml.err"
echo "--- nvidia-smi"
cat "$WORK/gpus.csv" "$WORK/apps.csv"
echo "---"

python3 - "$WORK" "$NVML_RC" "$SMI_RC" "$GPU" "$GIB" "$HOLDER" "$OUTSIDER" "$UNIT" <<'EOF'
import json, sys

work, nvml_rc, smi_rc, gpu, gib, holder, outsider, unit = sys.argv[1:]
nvml_rc, smi_rc, gpu, holder, outsider = map(int, (nvml_rc, smi_rc, gpu, holder, outsider))
gib = float(gib)
MiB, GiB = 1 << 20, 1 << 30
failed = 0

def check(ok, what):
    global failed
    print(("PASS " if ok else "FAIL ") + what)
    failed += not ok

smi_gpus = {}
for line in open(f"{work}/gpus.csv"):
    index, uuid, name, total, used, free = [f.strip() for f in line.split(",")]
    smi_gpus[int(index)] = dict(uuid=uuid, name=name, total=int(total) * MiB,
                                used=(int(total) - int(free)) * MiB)
smi_apps = {}  # (uuid, pid) -> bytes
for line in open(f"{work}/apps.csv"):
    fields = [f.strip() for f in line.split(",")]
    if len(fields) == 3 and fields[1].isdigit():
        smi_apps[(fields[0], int(fields[1]))] = int(fields[2]) * MiB if fields[2].isdigit() else None

exact = {}  # pid -> bytes, from pynvml when it is installed
try:
    import pynvml
    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(gpu)
    exact = {p.pid: p.usedGpuMemory for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h)}
    pynvml.nvmlShutdown()
except Exception as e:  # noqa: BLE001
    print(f"SKIP exact byte comparison with pynvml: {e}")

def compare(label, path, rc, source, exact_tolerance):
    try:
        seen = json.load(open(path))
    except Exception as e:  # noqa: BLE001
        check(False, f"{label}: output is JSON ({e})")
        return
    g = seen["gpus"]
    check(rc == 0 and g["known"] and seen["source"] == source,
          f"{label}: known via {source} (exit {rc}, source {seen['source']!r}, error {g['error']!r})")
    devices = {d["index"]: d for d in g["devices"]}
    check(sorted(devices) == sorted(smi_gpus),
          f"{label}: devices {sorted(devices)} == nvidia-smi's {sorted(smi_gpus)}")
    for i, s in sorted(smi_gpus.items()):
        d = devices.get(i)
        if d is None:
            continue
        check(d["uuid"] == s["uuid"] and d["name"] == s["name"],
              f"{label}: GPU {i} is {d['uuid']} {d['name']!r} (nvidia-smi: {s['uuid']} {s['name']!r})")
        check(abs(d["memory_total"] - s["total"]) < MiB,
              f"{label}: GPU {i} memory_total {d['memory_total']} within 1 MiB of {s['total']}")
        check(abs(d["memory_used"] - s["used"]) <= 512 * MiB,
              f"{label}: GPU {i} memory_used {d['memory_used']} within 512 MiB of "
              f"nvidia-smi's total-free {s['used']}")
        mine = {p["pid"]: p for p in d["processes"]}
        theirs = {pid: b for (uuid, pid), b in smi_apps.items() if uuid == s["uuid"]}
        check(sorted(mine) == sorted(theirs),
              f"{label}: GPU {i} processes {sorted(mine)} == nvidia-smi's {sorted(theirs)}")
        for pid, b in sorted(theirs.items()):
            p = mine.get(pid)
            if p is not None and b is not None:
                check(abs(p["used_bytes"] - b) < MiB,
                      f"{label}: GPU {i} pid {pid} used_bytes {p['used_bytes']} matches "
                      f"nvidia-smi's {b // MiB} MiB")
    d = devices.get(gpu, {"processes": []})
    procs = {p["pid"]: p for p in d["processes"]}
    h = procs.get(holder)
    check(h is not None, f"{label}: holder pid {holder} listed on GPU {gpu}")
    if h:
        check(h["unit"] == unit, f"{label}: holder attributed to unit {h['unit']!r} (want {unit!r})")
        check(h["name"] == "python3", f"{label}: holder named {h['name']!r}")
        check(h["used_bytes"] >= gib * GiB,
              f"{label}: holder uses {h['used_bytes']} bytes >= the {gib:g} GiB it allocated")
        if holder in exact:
            check(abs(h["used_bytes"] - exact[holder]) <= exact_tolerance,
                  f"{label}: holder used_bytes {h['used_bytes']} vs pynvml's {exact[holder]}")
    o = procs.get(outsider)
    check(o is not None and o["unit"] == "",
          f"{label}: outsider pid {outsider} listed with no unit "
          f"({'missing' if o is None else repr(o['unit'])})")
    for note in seen.get("notes", []):
        print(f"NOTE {label}: {note}")

compare("nvml", f"{work}/nvml.json", nvml_rc, "nvml", 0)  # the same NVML call: same bytes
compare("nvidia-smi fallback", f"{work}/smi.json", smi_rc, "nvidia-smi", MiB)
print(f"{'FAIL' if failed else 'PASS'}: {failed} check(s) failed")
sys.exit(1 if failed else 0)
EOF
