#!/usr/bin/python3
"""make_repo.py - lay out the download benchmark's repo once, and materialize its big files.

  make_repo.py --cache DIR --file-mib N [--files 4]

DIR/repos/bench/model/main/        the fake Hub's repo folder (tests/fake_hub/fake_hub.py --repos)
    model-0000K-of-0000F.safetensors.synthetic   {"size", "seed"}: the fake computes (and caches)
                                                 their sha256 from its own generator
    config.json, tokenizer.json, ...             small real files, served by the fake itself
DIR/cdn/repos/AA/BB/<sha256>       the same bytes as real files, in the path layout of the fake's
                                   CDN URLs, for nginx to serve (the fake's 302s point there)

The bytes come from fake_hub.SyntheticBlob, the very generator the fake serves and hashes, and
each materialized file is hashed while it is written and checked against the fake's sha256, so
what nginx serves is exactly what the fake's API, tree and X-Linked-Etag claim. Files already
materialized with the right size are kept (a cache reused across runs). Prints one JSON line:
{"repo": "bench/model", "files": [{"path", "size", "sha256", "lfs"}], "cdn_files": [paths]}.
"""

import argparse
import hashlib
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "fake_hub"))
import fake_hub  # noqa: E402

REPO = "bench/model"


def small_files(n_files, file_size):
    """Deterministic small files of a typical safetensors checkpoint."""
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
           "num_hidden_layers": 32, "num_attention_heads": 32, "vocab_size": 32000,
           "torch_dtype": "bfloat16"}
    weight_map = {}
    for k in range(n_files):
        for layer in range(8):
            weight_map["model.layers.%d.mlp.w%d.weight" % (k * 8 + layer, layer % 3)] = \
                "model-%05d-of-%05d.safetensors" % (k + 1, n_files)
    index = {"metadata": {"total_size": n_files * file_size}, "weight_map": weight_map}
    vocab = {"tok%05d" % i: i for i in range(32000)}
    merges = ["t%d o%d" % (i, i + 1) for i in range(60000)]
    tokenizer = {"version": "1.0", "model": {"type": "BPE", "vocab": vocab, "merges": merges}}
    return {
        "config.json": json.dumps(cfg, indent=2),
        "generation_config.json": json.dumps({"bos_token_id": 1, "eos_token_id": 2}),
        "model.safetensors.index.json": json.dumps(index, indent=2),
        "tokenizer.json": json.dumps(tokenizer),
        "tokenizer_config.json": json.dumps({"model_max_length": 4096, "tokenizer_class": "LlamaTokenizer"}),
        "special_tokens_map.json": json.dumps({"bos_token": "<s>", "eos_token": "</s>"}),
        "README.md": "# bench/model\n\nSynthetic weights for berth's download benchmark.\n",
    }


def write_if_changed(path, data):
    if os.path.exists(path):
        with open(path, "rb") as f:
            if f.read() == data:
                return
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cache", required=True)
    ap.add_argument("--file-mib", type=int, required=True)
    ap.add_argument("--files", type=int, default=4)
    opts = ap.parse_args()
    size = opts.file_mib << 20
    rev_dir = os.path.join(opts.cache, "repos", REPO, "main")
    os.makedirs(rev_dir, exist_ok=True)
    wanted = set()
    out = {"repo": REPO, "files": [], "cdn_files": []}
    for name, text in small_files(opts.files, size).items():
        data = text.encode()
        write_if_changed(os.path.join(rev_dir, name), data)
        wanted.add(name)
        out["files"].append({"path": name, "size": len(data), "lfs": False,
                             "sha256": hashlib.sha256(data).hexdigest()})
    for k in range(opts.files):
        name = "model-%05d-of-%05d.safetensors" % (k + 1, opts.files)
        spec_path = os.path.join(rev_dir, name + ".synthetic")
        write_if_changed(spec_path, json.dumps({"size": size, "seed": 1000 + k}).encode())
        wanted.update({name + ".synthetic", name + ".synthetic.hashes"})
        blob = fake_hub.SyntheticBlob(size, 1000 + k, spec_path + ".hashes", need_git_sha1=False)
        sha = blob.sha256
        cdn = os.path.join(opts.cache, "cdn", "repos", sha[:2], sha[2:4], sha)
        if not (os.path.exists(cdn) and os.path.getsize(cdn) == size):
            print("make_repo: materializing %s (%d MiB) -> %s" % (name, opts.file_mib, cdn), file=sys.stderr)
            os.makedirs(os.path.dirname(cdn), exist_ok=True)
            h = hashlib.sha256()
            tmp = cdn + ".tmp"
            with open(tmp, "wb") as f:
                for piece in blob.pieces(0, size):
                    h.update(piece)
                    f.write(piece)
            if h.hexdigest() != sha:
                os.unlink(tmp)
                sys.exit("make_repo: %s: materialized sha256 %s != the fake's %s" % (name, h.hexdigest(), sha))
            os.chmod(tmp, 0o644)
            os.replace(tmp, cdn)
        out["files"].append({"path": name, "size": size, "lfs": True, "sha256": sha})
        out["cdn_files"].append(cdn)
    # Leftovers of another --size-gib: drop them from the repo (the fake would serve them).
    for name in os.listdir(rev_dir):
        if name not in wanted:
            os.unlink(os.path.join(rev_dir, name))
    keep = set(out["cdn_files"])
    cdn_root = os.path.join(opts.cache, "cdn", "repos")
    for root, _dirs, names in os.walk(cdn_root):
        for name in names:
            p = os.path.join(root, name)
            if p not in keep:
                os.unlink(p)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
