#!/usr/bin/env python3
"""Writes a large llama-architecture GGUF in F16 with random weights and llama.cpp's real
tokenizer, fast enough for a device call: tests/real_engine/make_gguf.py's model (same keys, same
tensors, the byte tokens typed as control tokens) with the 2-D weights in F16, as a converted 8B
checkpoint has them, cut as views from one 256 Mi-value random pool instead of drawn one value at
a time (an 8B shape is 7.2 billion values: drawing each takes minutes, the pool a second). The
values do not matter for load time, memory or speed; llama-server serves the file like any model.

  make_gguf_f16.py --llama-src DIR --out FILE [--embd 4096] [--layers 32] [--ff 14336]
                   [--heads 32] [--kv 8] [--ctx 8192] [--seed 1]

The defaults are the 8B shape of ../shared/reference/real-engines.md (14,484,737,728 bytes).
Needs numpy and llama.cpp's gguf-py (DIR/gguf-py)."""
import argparse
import os
import sys
import time

POOL = 1 << 28  # values in the random pool: larger than any one tensor of the 8B shape


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--llama-src", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--embd", type=int, default=4096)
    p.add_argument("--layers", type=int, default=32)
    p.add_argument("--ff", type=int, default=14336)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--kv", type=int, default=8)
    p.add_argument("--ctx", type=int, default=8192)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    sys.path.insert(0, os.path.join(a.llama_src, "gguf-py"))
    import numpy as np
    import gguf

    t0 = time.monotonic()
    vocab = gguf.GGUFReader(os.path.join(a.llama_src, "models", "ggml-vocab-llama-spm.gguf"))
    field = lambda name: vocab.fields[name].contents()
    tokens = field("tokenizer.ggml.tokens")
    types = [int(t) for t in field("tokenizer.ggml.token_type")]
    types = [int(gguf.TokenType.CONTROL) if t == int(gguf.TokenType.BYTE) else t for t in types]
    n_vocab = len(tokens)

    w = gguf.GGUFWriter(a.out, "llama")
    w.add_name("berth-test-random-f16")
    w.add_context_length(a.ctx)
    w.add_embedding_length(a.embd)
    w.add_block_count(a.layers)
    w.add_feed_forward_length(a.ff)
    w.add_head_count(a.heads)
    w.add_head_count_kv(a.kv)
    w.add_rope_dimension_count(a.embd // a.heads)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(n_vocab)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    w.add_tokenizer_model(field("tokenizer.ggml.model"))
    w.add_token_list(tokens)
    w.add_token_scores(field("tokenizer.ggml.scores"))
    w.add_token_types(types)
    w.add_bos_token_id(int(field("tokenizer.ggml.bos_token_id")))
    w.add_eos_token_id(int(field("tokenizer.ggml.eos_token_id")))
    w.add_unk_token_id(int(field("tokenizer.ggml.unknown_token_id")))

    rng = np.random.default_rng(a.seed)
    pool = (rng.standard_normal(POOL, dtype=np.float32) * 0.02).astype(np.float16)

    def t(rows, cols):  # a view of the pool at a random offset: no copy, no new values drawn
        n = rows * cols
        if n > POOL:
            raise SystemExit(f"a {rows} x {cols} tensor is larger than the pool of {POOL} values")
        start = int(rng.integers(0, POOL - n + 1))
        return pool[start:start + n].reshape(rows, cols)

    ones = lambda n: np.ones(n, dtype=np.float32)  # norms stay F32, as in a converted checkpoint
    head = a.embd // a.heads
    w.add_tensor("token_embd.weight", t(n_vocab, a.embd))
    w.add_tensor("output_norm.weight", ones(a.embd))
    w.add_tensor("output.weight", t(n_vocab, a.embd))
    for i in range(a.layers):
        b = "blk.%d." % i
        w.add_tensor(b + "attn_norm.weight", ones(a.embd))
        w.add_tensor(b + "attn_q.weight", t(a.embd, a.embd))
        w.add_tensor(b + "attn_k.weight", t(a.kv * head, a.embd))
        w.add_tensor(b + "attn_v.weight", t(a.kv * head, a.embd))
        w.add_tensor(b + "attn_output.weight", t(a.embd, a.embd))
        w.add_tensor(b + "ffn_norm.weight", ones(a.embd))
        w.add_tensor(b + "ffn_gate.weight", t(a.ff, a.embd))
        w.add_tensor(b + "ffn_up.weight", t(a.ff, a.embd))
        w.add_tensor(b + "ffn_down.weight", t(a.embd, a.ff))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(a.out, os.path.getsize(a.out), "bytes in %.1f s" % (time.monotonic() - t0))


if __name__ == "__main__":
    main()
