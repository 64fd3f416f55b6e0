"""train_gpt against Hugging Face transformers' GPT-2: checkpoints both
ways, K training steps, and generation with and without the key-value
caches. Run on the GPU machine (torch, transformers, safetensors):

    python3 tests/torch/gpt2_hf.py --train-gpt gpu_stage/bin/train_gpt --work /tmp/gpt2_hf

A small GPT-2 (transformers' GPT2Config: 2 layers, 4 heads, 64 wide, block
64, a vocabulary of 1000, which ge2 pads to 1024, GELU tanh ("gelu_new"), no
dropout) is initialised at random by GPT2LMHeadModel and saved with
save_pretrained (no weights can be downloaded there). Token shards of
random ids in llm.c's format are written beside it. Checks, each a
PASS/FAIL line, "N passed, N failed" last (exit 1 on a failure):

1. transformers -> ge2: train_gpt --init <the saved folder> gives, on the
   first --no-shuffle batch, the loss transformers gives in float64, within
   10x transformers' own float32 error (the loss is read from --log-file,
   seven digits).
2. K AdamW steps from that init (constant lr, weight decay on matrices,
   clipping at 1.0, --no-shuffle batches): ge2's parameters, saved with
   --save-hf, against transformers' model trained the same way in float64,
   within 10x its float32 error per tensor (ge2 on CPU and CUDA).
3. ge2 -> transformers: GPT2LMHeadModel.from_pretrained of ge2's --save-hf
   folder gives on a batch the loss ge2 gives for that folder (1.'s way).
4. Generation: on CUDA and on the CPU the key-value caches give the tokens
   the whole window gives, and CUDA's tokens equal the CPU's (fp32).
"""
import argparse
import json
import math
import os
import re
import struct
import subprocess
import sys

import numpy as np
import torch

from ge2_torch import normwise, within_float32_error

V, BLOCK, LAYERS, HEADS, EMBD, BATCH = 1000, 64, 2, 4, 64, 4


def write_shard(path, ids):
    with open(path, "wb") as f:
        f.write(struct.pack("<3i", 20240520, 1, len(ids)) + bytes(1012) + np.asarray(ids, dtype="<u2").tobytes())


def batch(tokens, step):
    """train_gpt --no-shuffle: row r of step s starts at ((s B + r) T) mod (N - T - 1)"""
    span = len(tokens) - BLOCK - 1
    starts = [((step * BATCH + r) * BLOCK) % span for r in range(BATCH)]
    x = torch.tensor(np.stack([tokens[i:i + BLOCK] for i in starts]).astype(np.int64))
    y = torch.tensor(np.stack([tokens[i + 1:i + 1 + BLOCK] for i in starts]).astype(np.int64))
    return x, y


def loss_of(model, x, y):
    logits = model(input_ids=x).logits
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))


def train_gpt(a, dev, args):
    out = subprocess.run([a.train_gpt, "--device", dev] + args, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"train_gpt {' '.join(args)} exited {out.returncode}: {out.stderr.strip()[-800:]}")
    return out.stdout


def ge2_first_loss(a, dev, init, data, work):
    """ge2's loss on the first --no-shuffle batch of the model in init: its first step's, read from --log-file"""
    log = os.path.join(work, f"first_{dev}.jsonl")
    train_gpt(a, dev, data + ["--init", init, "--batch", str(BATCH), "--no-shuffle", "--lr", "1e-12", "--min-lr",
                              "1e-12", "--warmup", "0", "--max-iters", "1", "--log-interval", "1", "--eval-interval",
                              "1000000", "--eval-iters", "1", "--sample", "0", "--log-file", log])
    rows = [json.loads(line) for line in open(log)]
    return next(r["loss"] for r in rows if r["kind"] == "train")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--train-gpt", required=True)
    ap.add_argument("--work", default="/tmp/ge2_gpt2_hf")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--devices", default="cpu,cuda")
    a = ap.parse_args()
    from transformers import GPT2Config, GPT2LMHeadModel
    import transformers
    os.makedirs(a.work, exist_ok=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    rng = np.random.default_rng(3)
    train_ids, val_ids = rng.integers(0, V, 6000), rng.integers(0, V, 2000)
    write_shard(os.path.join(a.work, "hf_train_000000.bin"), train_ids)
    write_shard(os.path.join(a.work, "hf_val_000000.bin"), val_ids)
    data = ["--train-tokens", os.path.join(a.work, "hf_train_*.bin"), "--val-tokens",
            os.path.join(a.work, "hf_val_*.bin"), "--vocab-size", str(V)]
    shape = ["--n-layer", str(LAYERS), "--n-head", str(HEADS), "--n-embd", str(EMBD), "--block-size", str(BLOCK),
             "--gelu", "tanh", "--dropout", "0"]
    config = GPT2Config(vocab_size=V, n_positions=BLOCK, n_embd=EMBD, n_layer=LAYERS, n_head=HEADS,
                        activation_function="gelu_new", resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    torch.manual_seed(7)
    init_dir = os.path.join(a.work, "hf_init")
    GPT2LMHeadModel(config).save_pretrained(init_dir)

    def hf_model(path, dtype):
        m = GPT2LMHeadModel.from_pretrained(path, torch_dtype=dtype, attn_implementation="eager")
        return m.eval()

    print(f"transformers {transformers.__version__}, torch {torch.__version__}, "
          f"{torch.cuda.get_device_name() if torch.cuda.is_available() else 'no GPU'}")
    results = []

    def report(ok, what):
        results.append(bool(ok))
        print(f"{'PASS' if ok else 'FAIL'} {what}", flush=True)

    def loss_check(name, path, dev_losses):
        x, y = batch(train_ids, 0)
        with torch.no_grad():
            ref = loss_of(hf_model(path, torch.float64), x, y).item()
            f32 = loss_of(hf_model(path, torch.float32), x, y).item()
        bound = 10 * max(abs(f32 - ref), 1e-6 * abs(ref)) + 5e-7 * abs(ref)  # + the log's seven digits
        for dev, got in dev_losses.items():
            report(abs(got - ref) <= bound, f"{name} on {dev}: ge2 {got:.7f}, transformers float64 {ref:.7f} "
                   f"(float32 {f32:.7f}); |difference| {abs(got - ref):.2e}, bound {bound:.2e}")

    devices = a.devices.split(",")
    # 1. transformers -> ge2
    loss_check("transformers' checkpoint in ge2", init_dir,
               {dev: ge2_first_loss(a, dev, init_dir, data + shape, a.work) for dev in devices})

    # 2. K steps from the transformers init, against transformers in float64
    lr = 3e-3

    def torch_train(dtype):
        m = GPT2LMHeadModel.from_pretrained(init_dir, torch_dtype=dtype, attn_implementation="eager")
        m.train()
        decay = [p for p in m.parameters() if p.dim() >= 2]
        rest = [p for p in m.parameters() if p.dim() < 2]
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
                                lr=lr, betas=(0.9, 0.99))
        for s in range(a.steps):
            x, y = batch(train_ids, s)
            opt.zero_grad()
            loss_of(m, x, y).backward()
            torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
            opt.step()
        return {k: v.detach() for k, v in m.state_dict().items()}

    want, f32 = torch_train(torch.float64), torch_train(torch.float32)
    from safetensors.torch import load_file
    saved = {}
    for dev in devices:
        out_dir = os.path.join(a.work, f"ge2_{dev}")
        train_gpt(a, dev, data + shape + ["--init", init_dir, "--batch", str(BATCH), "--no-shuffle", "--lr", str(lr),
                                          "--min-lr", str(lr), "--warmup", "0", "--max-iters", str(a.steps),
                                          "--eval-interval", "1000000", "--eval-iters", "1", "--sample", "0",
                                          "--save-hf", out_dir])
        got = load_file(os.path.join(out_dir, "model.safetensors"))
        names = [k for k in want if k in got]
        ok, worst_name, worst = within_float32_error(got, {k: want[k] for k in names}, f32)
        missing = [k for k in want if k not in got and not k.endswith((".attn.bias", ".attn.masked_bias"))
                   and k != "lm_head.weight"]
        report(ok and not missing and len(names) == len(got),
               f"{a.steps} AdamW steps on {dev} from transformers' init vs transformers float64: worst {worst_name} "
               f"(ge2 error / bound {worst:.2f}){'; missing ' + ', '.join(missing) if missing else ''}")
        saved[dev] = out_dir

    # 3. ge2 -> transformers: its folder loads, and gives ge2's loss
    for dev in devices:
        loss_check(f"ge2's --save-hf ({dev}) in transformers", saved[dev],
                   {dev: ge2_first_loss(a, dev, saved[dev], data + shape, a.work)})

    # 4. generation: caches against the whole window, CPU against CUDA
    gen = data + ["--generate-only", "--init", saved[devices[0]], "--batch", str(BATCH), "--sample", "48",
                  "--top-k", "50", "--temperature", "0.9", "--seed", "11"]
    samples, rates = {}, {}
    for dev in devices:
        for way in ("cached", "window"):
            out = train_gpt(a, dev, gen + (["--no-kv-cache"] if way == "window" else []))
            rates[dev, way] = re.search(r"^generation: .*", out, re.M).group(0)
            samples[dev, way] = out[out.index("sample ("):]
        report(samples[dev, "cached"] == samples[dev, "window"],
               f"{dev}: the key-value caches give the whole window's 48 tokens ({rates[dev, 'cached']}; "
               f"{rates[dev, 'window']})")
    if len(devices) > 1:
        report(samples[devices[0], "cached"] == samples[devices[1], "cached"],
               f"one seed, one text: {devices[0]} and {devices[1]} draw the same 48 tokens")
    print(samples[devices[-1], "cached"].strip()[:400])
    passed = sum(results)
    print(f"{passed} passed, {len(results) - passed} failed")
    sys.exit(0 if passed == len(results) else 1)


if __name__ == "__main__":
    main()
