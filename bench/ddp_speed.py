"""PyTorch DistributedDataParallel on the data-parallel benchmark's models,
the reference bench/dp_speed.sh measures ge2 against on the same GPUs in the
same call.

    torchrun --nproc_per_node N bench/ddp_speed.py --model mlp [--hidden 4096,4096,4096] [--batch 1024]
    torchrun --nproc_per_node N bench/ddp_speed.py --model gpt [--batch 64]

mlp: 784-hidden...-10 (ReLU, mean cross-entropy, Adam), fp32.
gpt: train_gpt's default model (tests/torch/nanogpt.py: 6 layers, 6 heads,
384 wide, block 256, dropout 0.2) with nanoGPT's AdamW and gradient
clipping at 1.0, fp32 (TF32 off, train_gpt's default precision) or with
--tf32 TF32 GEMMs (train_gpt --precision tf32).
Each rank trains on random data already on its GPU at --batch examples
(sequences) per step, with DDP's default bucketing (bucket_cap_mb 25), for
--warmup then --steps timed steps. Rank 0 prints one line: "ddp MODEL ranks
N batch B steps S: X ex/s (Y ms/step)", examples counted over every rank.
"""
import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn

here = os.path.dirname(os.path.abspath(__file__))
# the repository's bench/ or the staged gpu_stage/bench/
for rel in ("..", "../.."):
    sys.path.insert(0, os.path.join(here, rel, "tests", "torch"))


def mlp(hidden):
    dims = [784] + [int(h) for h in hidden.split(",")] + [10]
    layers = []
    for i in range(len(dims) - 1):
        layers.append(nn.Linear(dims[i], dims[i + 1]))
        if i + 2 < len(dims):
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=("mlp", "gpt"), default="mlp")
    ap.add_argument("--hidden", default="4096,4096,4096", help="mlp: the hidden widths")
    ap.add_argument("--batch", type=int, default=None, help="examples per rank per step (mlp 1024, gpt 64)")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--tf32", action="store_true", help="TF32 tensor-core GEMMs (fp32 otherwise)")
    a = ap.parse_args()
    batch = a.batch or (1024 if a.model == "mlp" else 64)

    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    local = int(os.environ.get("LOCAL_RANK", rank))
    torch.cuda.set_device(local)
    torch.backends.cuda.matmul.allow_tf32 = a.tf32
    torch.backends.cudnn.allow_tf32 = a.tf32
    torch.manual_seed(1)

    if a.model == "mlp":
        net = mlp(a.hidden).cuda()
        opt = torch.optim.Adam(net.parameters(), lr=1e-3)
        x = torch.rand(batch, 784, device="cuda")
        y = torch.randint(0, 10, (batch,), device="cuda")
        clip = None
    else:
        from nanogpt import GPT, adamw
        vocab, block = 82, 256  # the Austen corpus's distinct bytes, train_gpt's block
        net = GPT(vocab, block, 6, 6, 384, 0.2, attn_dropout=True).cuda()  # as train_gpt's model
        opt = adamw(net, 1e-3)
        x = torch.randint(0, vocab, (batch, block), device="cuda")
        y = torch.randint(0, vocab, (batch, block), device="cuda").view(-1)
        clip = 1.0
    model = nn.parallel.DistributedDataParallel(net, device_ids=[local])
    loss_fn = nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        out = model(x)
        loss_fn(out.view(-1, out.size(-1)), y).backward()
        if clip:
            nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()

    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    dist.barrier()
    start = time.perf_counter()
    for _ in range(a.steps):
        step()
    torch.cuda.synchronize()
    secs = time.perf_counter() - start
    if rank == 0:
        ex = a.steps * batch * world
        print(f"ddp {a.model}{' tf32' if a.tf32 else ''} ranks {world} batch {batch} steps {a.steps}: {ex / secs:.0f} ex/s "
              f"({1e3 * secs / a.steps:.3f} ms/step)", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
