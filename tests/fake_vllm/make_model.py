#!/usr/bin/python3
"""make_model.py - writes a tiny fake model that fake_vllm.py (and berth's store checks) accept.

  make_model.py DIR [--shards N] [--max-position-embeddings N] [--architecture NAME]
  make_model.py FILE.gguf --gguf

A directory gets config.json, N small valid .safetensors files (a JSON header, then a few bytes of
data) and, when N > 1, model.safetensors.index.json naming the shards. --gguf writes a small file
starting with the GGUF magic instead. Importable: make_model(path, shards=1), make_gguf(path).
Python 3 standard library only.
"""

import argparse
import json
import os
import struct
import sys


def safetensors_bytes(tensor_name, values):
    data = struct.pack("<%df" % len(values), *values)
    header = {"__metadata__": {"format": "pt"},
              tensor_name: {"dtype": "F32", "shape": [len(values)],
                            "data_offsets": [0, len(data)]}}
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)  # the format pads the header to 8 bytes with spaces
    return struct.pack("<Q", len(text)) + text + data


def make_model(path, shards=1, max_position_embeddings=2048, architecture="LlamaForCausalLM"):
    """Creates directory `path` (and parents) holding a fake model; returns `path`."""
    os.makedirs(path, exist_ok=True)
    config = {"architectures": [architecture], "model_type": "llama", "hidden_size": 4,
              "num_hidden_layers": shards, "num_attention_heads": 1,
              "max_position_embeddings": max_position_embeddings, "torch_dtype": "float32",
              "vocab_size": 8}
    with open(os.path.join(path, "config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    weight_map = {}
    for i in range(shards):
        name = ("model.safetensors" if shards == 1
                else "model-%05d-of-%05d.safetensors" % (i + 1, shards))
        tensor = "model.layers.%d.weight" % i
        with open(os.path.join(path, name), "wb") as f:
            f.write(safetensors_bytes(tensor, [float(i), 1.0, 2.0, 3.0]))
        weight_map[tensor] = name
    if shards > 1:
        with open(os.path.join(path, "model.safetensors.index.json"), "w",
                  encoding="utf-8") as f:
            json.dump({"metadata": {"total_size": 16 * shards}, "weight_map": weight_map}, f,
                      indent=2)
            f.write("\n")
    return path


def make_gguf(path, architecture="llama"):
    """Writes a small file that starts like a GGUF v3 file: no tensors, one metadata key,
    general.architecture (a string, type 8); returns `path`."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    key, value = b"general.architecture", architecture.encode()
    with open(path, "wb") as f:
        f.write(b"GGUF" + struct.pack("<IQQ", 3, 0, 1))
        f.write(struct.pack("<Q", len(key)) + key + struct.pack("<I", 8))
        f.write(struct.pack("<Q", len(value)) + value)
    return path


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path")
    parser.add_argument("--shards", type=int, default=1)
    parser.add_argument("--max-position-embeddings", type=int, default=2048)
    parser.add_argument("--architecture", default="LlamaForCausalLM")
    parser.add_argument("--gguf", action="store_true")
    args = parser.parse_args(argv)
    if args.gguf:
        make_gguf(args.path)
    else:
        make_model(args.path, args.shards, args.max_position_embeddings, args.architecture)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
