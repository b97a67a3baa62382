import torch
import torch.nn.functional as F


def info_nce(z1: torch.Tensor, z2: torch.Tensor, temperature: float = 0.1) -> torch.Tensor:
    a = F.normalize(z1, dim=-1)
    b = F.normalize(z2, dim=-1)
    logits = a @ b.T / temperature
    return F.cross_entropy(logits, torch.arange(z1.shape[0]))
