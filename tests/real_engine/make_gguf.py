#!/usr/bin/python3
"""Writes a llama-architecture GGUF with random weights and a real tokenizer, for berth's
real-engine tests: llama-server loads and serves it like any model (the shapes set its size, load
time and speed; the values do not matter). The tokenizer is llama.cpp's own vocab-only
models/ggml-vocab-llama-spm.gguf (32,000 tokens), written with llama.cpp's gguf-py, so nothing
is downloaded and no model is committed.

Random weights sample the byte tokens (<0xE2> ...) in orders that are not UTF-8, and llama-server
then fails the request mid-stream (its output parser); the byte tokens are given the control
type, which prints nothing, so every request completes (../shared/reference/real-engines.md).

  make_gguf.py --llama-src DIR --out FILE [--embd 64] [--layers 2] [--ff 128] [--heads 4]
               [--kv 2] [--ctx 2048] [--seed 1] [--f16] [--truncate BYTES] [--bad-magic]

--f16 writes the 2-D weights in F16, as a converted checkpoint has them (norms stay F32), cut as
views from one random pool of 2^28 values instead of drawn one value at a time: an 8B shape
(--embd 4096 --layers 32 --ff 14336 --heads 32 --kv 8, 14,484,737,728 bytes; tests/gpu) is 7.2
billion values, which take minutes to draw and a second to cut.
--truncate and --bad-magic write a broken file (a download cut short; not a GGUF at all).
Needs Debian's python3-numpy (/usr/bin/python3)."""
import argparse
import os
import sys


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--llama-src", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--embd", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--ff", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv", type=int, default=2)
    p.add_argument("--ctx", type=int, default=2048)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--f16", action="store_true")
    p.add_argument("--truncate", type=int, default=0)
    p.add_argument("--bad-magic", action="store_true")
    a = p.parse_args()
    sys.path.insert(0, os.path.join(a.llama_src, "gguf-py"))
    import numpy as np
    import gguf

    vocab = gguf.GGUFReader(os.path.join(a.llama_src, "models", "ggml-vocab-llama-spm.gguf"))
    field = lambda name: vocab.fields[name].contents()
    tokens = field("tokenizer.ggml.tokens")
    types = [int(t) for t in field("tokenizer.ggml.token_type")]
    types = [int(gguf.TokenType.CONTROL) if t == int(gguf.TokenType.BYTE) else t for t in types]
    n_vocab = len(tokens)

    w = gguf.GGUFWriter(a.out, "llama")
    w.add_name("berth-test-random-f16" if a.f16 else "berth-test-random")
    w.add_context_length(a.ctx)
    w.add_embedding_length(a.embd)
    w.add_block_count(a.layers)
    w.add_feed_forward_length(a.ff)
    w.add_head_count(a.heads)
    w.add_head_count_kv(a.kv)
    w.add_rope_dimension_count(a.embd // a.heads)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(n_vocab)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16 if a.f16 else gguf.LlamaFileType.ALL_F32)
    w.add_tokenizer_model(field("tokenizer.ggml.model"))
    w.add_token_list(tokens)
    w.add_token_scores(field("tokenizer.ggml.scores"))
    w.add_token_types(types)
    w.add_bos_token_id(int(field("tokenizer.ggml.bos_token_id")))
    w.add_eos_token_id(int(field("tokenizer.ggml.eos_token_id")))
    w.add_unk_token_id(int(field("tokenizer.ggml.unknown_token_id")))

    rng = np.random.default_rng(a.seed)
    t = lambda *shape: (rng.standard_normal(shape) * 0.02).astype(np.float32)
    if a.f16:
        pool_n = 1 << 28  # larger than any one tensor of the 8B shape
        pool = (rng.standard_normal(pool_n, dtype=np.float32) * 0.02).astype(np.float16)

        def t(rows, cols):  # a view of the pool at a random offset: no copy, no new values
            n = rows * cols
            if n > pool_n:
                raise SystemExit(f"a {rows} x {cols} tensor is larger than the pool of {pool_n}")
            start = int(rng.integers(0, pool_n - n + 1))
            return pool[start:start + n].reshape(rows, cols)
    head = a.embd // a.heads
    w.add_tensor("token_embd.weight", t(n_vocab, a.embd))
    w.add_tensor("output_norm.weight", np.ones(a.embd, dtype=np.float32))
    w.add_tensor("output.weight", t(n_vocab, a.embd))
    for i in range(a.layers):
        b = "blk.%d." % i
        w.add_tensor(b + "attn_norm.weight", np.ones(a.embd, dtype=np.float32))
        w.add_tensor(b + "attn_q.weight", t(a.embd, a.embd))
        w.add_tensor(b + "attn_k.weight", t(a.kv * head, a.embd))
        w.add_tensor(b + "attn_v.weight", t(a.kv * head, a.embd))
        w.add_tensor(b + "attn_output.weight", t(a.embd, a.embd))
        w.add_tensor(b + "ffn_norm.weight", np.ones(a.embd, dtype=np.float32))
        w.add_tensor(b + "ffn_gate.weight", t(a.ff, a.embd))
        w.add_tensor(b + "ffn_up.weight", t(a.ff, a.embd))
        w.add_tensor(b + "ffn_down.weight", t(a.embd, a.ff))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    if a.truncate:
        os.truncate(a.out, a.truncate)
    if a.bad_magic:
        with open(a.out, "r+b") as f:
            f.write(b"NOPE")
    print(a.out, os.path.getsize(a.out))


if __name__ == "__main__":
    main()
