import torch
import torch.nn.functional as F


def label_smoothing_ce(logits: torch.Tensor, targets: torch.Tensor, eps: float = 0.1) -> torch.Tensor:
    n_classes = logits.shape[-1]
    logp = F.log_softmax(logits, dim=-1)
    q = torch.full_like(logp, eps / n_classes)
    q.scatter_(1, targets[:, None], 1 - eps + eps / n_classes)
    return -(q * logp).sum(-1).mean()
