#!/usr/bin/python3
"""make_test_repos.py - build the repo folder used by the fake Hub's tests and the npm check.

  make_test_repos.py DIR [--many N] [--big-size BYTES]

Layout written (see fake_hub.py for the scheme):
  org/tiny     main (commit aaaa...a1): config.json, README.md, "with space.txt", blob.dat (2000 B),
               model.safetensors (synthetic, 3 MB + 7), sub/dir/tokenizer.json;
               v1 (commit bbbb...b2): config.json only. Branches main, refs/pr/1 (-> v1); tag v1.0 (-> v1)
  org/many     main: N small files under files/dNN/ (default 100) and weights/w.bin (LFS by suffix)
  org/gated    main: config.json, model.safetensors (synthetic 1 MiB + 1)
  org/private  main: config.json
  org/big      main: model.safetensors (synthetic, --big-size, default 20 MiB + 12345)
Only the standard library; importable: build(dir, many=100, big_size=...).
"""

import json
import os
import sys

TINY_MAIN = "a" * 39 + "1"
TINY_V1 = "b" * 39 + "2"


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def synthetic(path, size, seed):
    write(path + ".synthetic", json.dumps({"size": size, "seed": seed}))


def build(root, many=100, big_size=20 * (1 << 20) + 12345):
    t = os.path.join(root, "org", "tiny")
    write(os.path.join(t, "main", "config.json"), json.dumps({"model_type": "llama", "hidden_size": 64}))
    write(os.path.join(t, "main", "README.md"), "# tiny\nA test repo.\n")
    write(os.path.join(t, "main", "with space.txt"), "spaces in names\n")
    write(os.path.join(t, "main", "blob.dat"), bytes(range(256)) * 7 + bytes(208))
    write(os.path.join(t, "main", "sub", "dir", "tokenizer.json"), json.dumps({"version": "1.0"}))
    synthetic(os.path.join(t, "main", "model.safetensors"), 3_000_007, 1)
    write(os.path.join(t, "v1", "config.json"), json.dumps({"model_type": "llama", "hidden_size": 32}))
    write(os.path.join(t, "refs.json"), json.dumps({
        "branches": {"main": "main", "refs/pr/1": "v1"}, "tags": {"v1.0": "v1"},
        "commits": {"main": TINY_MAIN, "v1": TINY_V1}}))
    m = os.path.join(root, "org", "many", "main")
    for i in range(many):
        write(os.path.join(m, "files", "d%02d" % (i // 10), "f%03d.txt" % i), "file %d\n" % i * (i + 1))
    write(os.path.join(m, "weights", "w.bin"), bytes(i % 251 for i in range(5000)))
    g = os.path.join(root, "org", "gated", "main")
    write(os.path.join(g, "config.json"), json.dumps({"model_type": "gated"}))
    synthetic(os.path.join(g, "model.safetensors"), (1 << 20) + 1, 2)
    write(os.path.join(root, "org", "private", "main", "config.json"), json.dumps({"model_type": "private"}))
    synthetic(os.path.join(root, "org", "big", "main", "model.safetensors"), big_size, 3)


def main(argv):
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--many", type=int, default=100)
    ap.add_argument("--big-size", type=int, default=20 * (1 << 20) + 12345)
    a = ap.parse_args(argv)
    build(a.dir, a.many, a.big_size)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
