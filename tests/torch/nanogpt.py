"""train_gpt's model in PyTorch: nanoGPT's GPT (model.py) with train_gpt's
choices - GELU (nanoGPT's exact nn.GELU(), train_gpt's default; gelu="tanh"
for GPT-2's approximation, --gelu tanh), biases, the LM head tied to the token embedding,
residual and embedding dropout, and with attn_dropout dropout on the
attention weights too (as nanoGPT and train_gpt have it) - under nanoGPT's
parameter names, and nanoGPT's initialisation. Shared by tests/torch/gpt_parity.py,
tests/torch/gpt_bf16_curve.py, bench/gpt_speed.py, bench/gpt_quality.py and
bench/ddp_speed.py, with nanoGPT's optimizer and learning-rate schedule."""
import math

import torch


class Block(torch.nn.Module):
    def __init__(self, c, h, dropout, attn_dropout=False, gelu="erf"):
        super().__init__()
        self.h = h
        self.gelu = "tanh" if gelu == "tanh" else "none"
        self.attn_p = dropout if attn_dropout else 0.0
        self.ln_1 = torch.nn.LayerNorm(c)
        self.attn = torch.nn.Module()
        self.attn.c_attn = torch.nn.Linear(c, 3 * c)
        self.attn.c_proj = torch.nn.Linear(c, c)
        self.ln_2 = torch.nn.LayerNorm(c)
        self.mlp = torch.nn.Module()
        self.mlp.c_fc = torch.nn.Linear(c, 4 * c)
        self.mlp.c_proj = torch.nn.Linear(4 * c, c)
        self.drop = torch.nn.Dropout(dropout)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.attn.c_attn(self.ln_1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.h, c // self.h).transpose(1, 2) for z in (q, k, v))
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True,
                                                             dropout_p=self.attn_p if self.training else 0.0)
        x = x + self.drop(self.attn.c_proj(y.transpose(1, 2).contiguous().view(b, t, c)))
        h = torch.nn.functional.gelu(self.mlp.c_fc(self.ln_2(x)), approximate=self.gelu)
        return x + self.drop(self.mlp.c_proj(h))


class GPT(torch.nn.Module):
    def __init__(self, vocab, block, n_layer, n_head, n_embd, dropout=0.0, attn_dropout=False, gelu="erf"):
        super().__init__()
        self.transformer = torch.nn.Module()
        self.transformer.wte = torch.nn.Embedding(vocab, n_embd)
        self.transformer.wpe = torch.nn.Embedding(block, n_embd)
        self.transformer.drop = torch.nn.Dropout(dropout)
        self.transformer.h = torch.nn.ModuleList(Block(n_embd, n_head, dropout, attn_dropout, gelu) for _ in range(n_layer))
        self.transformer.ln_f = torch.nn.LayerNorm(n_embd)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                torch.nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * n_layer))
            elif name.endswith("weight") and p.dim() == 2:
                torch.nn.init.normal_(p, 0.0, 0.02)
            elif name.endswith("bias"):
                torch.nn.init.zeros_(p)

    def forward(self, idx):
        t = idx.shape[1]
        x = self.transformer.wte(idx) + self.transformer.wpe(torch.arange(t, device=idx.device))
        x = self.transformer.drop(x)
        for block in self.transformer.h:
            x = block(x)
        return self.transformer.ln_f(x) @ self.transformer.wte.weight.t()  # the tied LM head


def adamw(model, lr, weight_decay=0.1, beta2=0.99, **kw):
    """nanoGPT's optimizer: weight decay for parameters with at least 2 dims only."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                              {"params": rest, "weight_decay": 0.0}], lr=lr, betas=(0.9, beta2), **kw)


def lr_at(it, lr, min_lr, warmup, max_iters):
    """nanoGPT's get_lr with lr_decay_iters = max_iters (train_gpt's lr_at): linear warm-up, then cosine."""
    if it < warmup:
        return lr * (it + 1) / (warmup + 1)
    if it > max_iters:
        return min_lr
    ratio = (it - warmup) / max(max_iters - warmup, 1)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (lr - min_lr)
