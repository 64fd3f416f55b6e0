#!/usr/bin/env python3
"""Writes token ids as llm.c's token shards (data/tokens.h): a header of 256
little-endian int32 (magic 20240520, version 1, the token count), then the
ids as little-endian uint16.

    spm_encode --model=M.model --output_format=id < text.txt | \\
        tools/write_token_shards.py --vocab M.vocab --out PREFIX

reads one line of ids per line of text (spm_encode's output), joins the
lines with the id of the newline byte piece <0x0A> (SentencePiece with
--byte_fallback has one), and writes the first 90% of the tokens as
PREFIX_train_000000.bin (more shards past --shard-tokens) and the rest as
PREFIX_val_000000.bin, as nanoGPT's and llm.c's data scripts split.

    tools/write_token_shards.py --random 10000000 --vocab-size 50257 --out PREFIX

writes that many uniformly random ids below --vocab-size instead (seeded,
so every run gets the same shards): the speed benchmarks' data, where the
text does not matter, read by ge2 and llm.c alike (bench/gpt2_speed.py)."""
import argparse
import random
import struct
import sys

MAGIC, VERSION = 20240520, 1


def newline_id(vocab_path):
    with open(vocab_path, encoding="utf-8") as f:
        for i, line in enumerate(f):
            if line.split("\t", 1)[0] == "<0x0A>":
                return i
    sys.exit(f"write_token_shards: {vocab_path} has no <0x0A> piece (train with --byte_fallback=true)")


def write(path, ids):
    with open(path, "wb") as f:
        f.write(struct.pack("<3i", MAGIC, VERSION, len(ids)) + bytes(1024 - 12))
        f.write(struct.pack(f"<{len(ids)}H", *ids))


def random_ids(n, vocab, seed):
    if n < 2:
        sys.exit(f"write_token_shards: --random {n}: at least 2 tokens")
    if vocab is None or not 1 <= vocab <= 65536:
        sys.exit(f"write_token_shards: --random needs --vocab-size between 1 and 65536 (uint16 ids), not {vocab}")
    rng = random.Random(seed)
    return [rng.randrange(vocab) for _ in range(n)]


def ids_from_stdin(vocab_path):
    with open(vocab_path, encoding="utf-8") as f:
        vocab = sum(1 for _ in f)
    if vocab > 65536:
        sys.exit(f"write_token_shards: {vocab} pieces do not fit uint16 ids")
    nl = newline_id(vocab_path)
    ids = []
    for n, line in enumerate(sys.stdin, 1):
        for tok in line.split():
            v = int(tok)
            if not 0 <= v < vocab:
                sys.exit(f"write_token_shards: line {n}: id {v} outside the vocabulary of {vocab}")
            ids.append(v)
        ids.append(nl)
    return ids


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--vocab", help="the SentencePiece .vocab file (its line i is token i)")
    p.add_argument("--random", type=int, metavar="N", help="write N random ids instead of reading standard input")
    p.add_argument("--vocab-size", type=int, help="--random: the ids are below this")
    p.add_argument("--seed", type=int, default=1, help="--random: the ids' seed")
    p.add_argument("--out", required=True, help="the shards' path prefix")
    p.add_argument("--val-fraction", type=float, default=0.1)
    p.add_argument("--shard-tokens", type=int, default=100_000_000, help="tokens per shard at most")
    a = p.parse_args(argv)
    if a.random is not None:
        ids = random_ids(a.random, a.vocab_size, a.seed)
    elif a.vocab:
        ids = ids_from_stdin(a.vocab)
    else:
        sys.exit("write_token_shards: give --vocab (ids on standard input) or --random N --vocab-size V")
    if len(ids) < 2:
        sys.exit("write_token_shards: no tokens on standard input")
    cut = int(len(ids) * (1 - a.val_fraction))
    if not 0 < cut < len(ids):
        sys.exit(f"write_token_shards: {len(ids)} tokens at --val-fraction {a.val_fraction} leave a split empty")
    splits = {"train": ids[:cut], "val": ids[cut:]}
    for name, part in splits.items():
        for k in range(0, len(part), a.shard_tokens):
            path = f"{a.out}_{name}_{k // a.shard_tokens:06d}.bin"
            write(path, part[k:k + a.shard_tokens])
            print(f"write_token_shards: {path}: {len(part[k:k + a.shard_tokens])} tokens")


if __name__ == "__main__":
    main(sys.argv[1:])
