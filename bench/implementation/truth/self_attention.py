import math

import torch
from torch import nn


class SelfAttention(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.q_proj = nn.Linear(dim, dim)
        self.k_proj = nn.Linear(dim, dim)
        self.v_proj = nn.Linear(dim, dim)
        self.out_proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        h, hd = self.heads, d // self.heads

        def split(y):
            return y.view(b, t, h, hd).transpose(1, 2)

        q, k, v = split(self.q_proj(x)), split(self.k_proj(x)), split(self.v_proj(x))
        w = (q @ k.transpose(-2, -1) / math.sqrt(hd)).softmax(-1)
        y = (w @ v).transpose(1, 2).reshape(b, t, d)
        return self.out_proj(y)
