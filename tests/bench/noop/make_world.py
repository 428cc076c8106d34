#!/usr/bin/python3
"""make_world.py - the converged world of the no-op benchmark (see README.md beside this file).

  make_world.py models  --n N --store DIR
  make_world.py manifest --n N --store DIR --unit-dir DIR --vllm PATH --ports P1,P2,... --out FILE
  make_world.py ansible --n N --store DIR --unit-dir DIR --out-dir DIR

`models` writes N tiny fake models (tests/fake_vllm/make_model.py) in the Hugging Face cache
layout: models--bench--model-NNN/{blobs,snapshots/<commit>,refs/main}, files as symlinks into
blobs named by their sha256, like huggingface_hub writes them. Each model's commit is a fixed
40-hex string, so the plan never asks the Hub.
`manifest` writes the berth manifest: those N models and N vllm-engine services (svc-NNN), each
on its own port, state running.
`ansible` writes the equivalent playbook, run after berth converged the host: one template task
per unit file (one shared Jinja template, rendered byte-identical to berth's unit files, which it
checks), one systemd_service task per service (state: started) and one get_url task per model
with the sha256 checksum of the weights file already at its dest. Python 3 standard library only.
"""

import argparse
import hashlib
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "fake_vllm"))
import make_model  # noqa: E402


def commit_of(i):
    return hashlib.sha1(b"berth-noop-bench-%d" % i).hexdigest()


def repo_of(i):
    return "bench/model-%03d" % i


def folder_of(store, i):
    org, name = repo_of(i).split("/")
    return os.path.join(store, "models--%s--%s" % (org, name))


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        h.update(f.read())
    return h.hexdigest()


def cmd_models(a):
    for i in range(a.n):
        folder = folder_of(a.store, i)
        snap = os.path.join(folder, "snapshots", commit_of(i))
        if os.path.isdir(snap):
            continue
        tmp = os.path.join(folder, ".make")
        make_model.make_model(tmp)
        os.makedirs(os.path.join(folder, "blobs"), exist_ok=True)
        os.makedirs(snap, exist_ok=True)
        for name in sorted(os.listdir(tmp)):
            digest = sha256_file(os.path.join(tmp, name))
            os.replace(os.path.join(tmp, name), os.path.join(folder, "blobs", digest))
            os.symlink(os.path.join("..", "..", "blobs", digest), os.path.join(snap, name))
        os.rmdir(tmp)
        os.makedirs(os.path.join(folder, "refs"), exist_ok=True)
        with open(os.path.join(folder, "refs", "main"), "w") as f:
            f.write(commit_of(i))
    return 0


def cmd_manifest(a):
    ports = [int(p) for p in a.ports.split(",")]
    if len(ports) < a.n:
        sys.exit("make_world.py: %d ports for %d services" % (len(ports), a.n))
    out = ["berth: 1", "host:", "  store: %s" % a.store, "  unit_dir: %s" % a.unit_dir,
           "  executables: {vllm: %s}" % a.vllm, "models:"]
    for i in range(a.n):
        out.append("  model-%03d: {source: hf://%s, revision: %s}" % (i, repo_of(i), commit_of(i)))
    out.append("services:")
    for i in range(a.n):
        out += ["  svc-%03d:" % i,
                "    model: model-%03d" % i,
                "    engine: vllm",
                "    gpus: [%d]" % (i % 8),
                "    port: %d" % ports[i],
                "    bind: 127.0.0.1",
                "    vllm: {gpu_memory_utilization: 0.10, max_model_len: 2048}",
                "    health: {timeout: 120s, interval: 200ms}"]
    with open(a.out, "w") as f:
        f.write("\n".join(out) + "\n")
    return 0


def cmd_ansible(a):
    """Turns berth's unit files into one shared template + per-service variables."""
    units = sorted(u for u in os.listdir(a.unit_dir) if re.fullmatch(r"svc-\d{3}\.service", u))
    if len(units) != a.n:
        sys.exit("make_world.py: %d berth units in %s, expected %d" % (len(units), a.unit_dir, a.n))
    os.makedirs(a.out_dir, exist_ok=True)
    template = None
    services = []
    for u in units:
        i = int(u[4:7])
        with open(os.path.join(a.unit_dir, u)) as f:
            text = f.read()
        # Everything that differs between two services: the name, the model's repo/commit/path,
        # the port, the GPU, and berth's marker hashes (a hash of the spec / of the content).
        name = "svc-%03d" % i
        v = {"name": name, "index": "%03d" % i, "commit": commit_of(i), "gpu": str(i % 8)}
        port = re.search(r'"--port" "(\d+)"', text) or re.search(r"--port (\d+)", text)
        v["port"] = port.group(1)
        hashes = sorted(set(re.findall(r"\b[0-9a-f]{64}\b", text)))
        for k, h in enumerate(hashes):
            v["hash%d" % k] = h
        t = text.replace("{", "{{ '{' }}") if "{" in text else text
        t = t.replace(v["commit"], "{{ item.commit }}")
        for k, h in enumerate(hashes):
            t = t.replace(h, "{{ item.hash%d }}" % k)
        t = t.replace(v["port"], "{{ item.port }}")
        t = t.replace("model-%s" % v["index"], "model-{{ item.index }}")
        t = t.replace(name, "{{ item.name }}")
        t = re.sub(r"CUDA_VISIBLE_DEVICES=%s\b" % v["gpu"], "CUDA_VISIBLE_DEVICES={{ item.gpu }}", t)
        if template is None:
            template = t
        elif t != template:
            sys.exit("make_world.py: %s does not fit the shared template; diff it against %s"
                     % (u, units[0]))
        services.append(v)
    with open(os.path.join(a.out_dir, "vllm.service.j2"), "w") as f:
        f.write(template)
    models = []
    for i in range(a.n):
        snap = os.path.join(folder_of(a.store, i), "snapshots", commit_of(i))
        dest = os.path.join(snap, "model.safetensors")
        models.append({"url": "https://huggingface.co/%s/resolve/%s/model.safetensors"
                              % (repo_of(i), commit_of(i)),
                       "dest": dest, "sha256": sha256_file(dest)})
    # JSON is YAML: variables as one JSON file, tasks with loops (how such playbooks are written).
    with open(os.path.join(a.out_dir, "vars.json"), "w") as f:
        json.dump({"unit_dir": a.unit_dir, "services": services, "models": models}, f, indent=1)
    play = """- hosts: localhost
  connection: local
  gather_facts: false
  vars_files: [vars.json]
  tasks:
    - name: model weights present (checksum of the file already there)
      ansible.builtin.get_url:
        url: "{{ item.url }}"
        dest: "{{ item.dest }}"
        checksum: "sha256:{{ item.sha256 }}"
      loop: "{{ models }}"
    - name: unit file
      ansible.builtin.template:
        src: vllm.service.j2
        dest: "{{ unit_dir }}/{{ item.name }}.service"
        mode: "0644"
      loop: "{{ services }}"
    - name: service running
      ansible.builtin.systemd_service:
        name: "{{ item.name }}.service"
        state: started
      loop: "{{ services }}"
"""
    with open(os.path.join(a.out_dir, "playbook.yml"), "w") as f:
        f.write(play)
    return 0


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("what", choices=["models", "manifest", "ansible"])
    p.add_argument("--n", type=int, required=True)
    p.add_argument("--store", required=True)
    p.add_argument("--unit-dir")
    p.add_argument("--vllm")
    p.add_argument("--ports")
    p.add_argument("--out")
    p.add_argument("--out-dir")
    a = p.parse_args(argv)
    return {"models": cmd_models, "manifest": cmd_manifest, "ansible": cmd_ansible}[a.what](a)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
