import torch
import torch.nn.functional as F


def focal_loss(logits: torch.Tensor, targets: torch.Tensor, gamma: float = 2.0) -> torch.Tensor:
    logp = F.log_softmax(logits, dim=-1).gather(1, targets[:, None]).squeeze(1)
    p = logp.exp()
    return (-(1 - p) ** gamma * logp).mean()
