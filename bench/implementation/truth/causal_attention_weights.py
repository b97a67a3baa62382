import math

import torch


def causal_attention_weights(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    t = q.shape[-2]
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    mask = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
    return scores.masked_fill(mask, float("-inf")).softmax(dim=-1)
