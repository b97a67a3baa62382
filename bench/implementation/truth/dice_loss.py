import torch


def dice_loss(probs: torch.Tensor, targets: torch.Tensor, smooth: float = 1.0) -> torch.Tensor:
    inter = (probs * targets).sum()
    return 1 - (2 * inter + smooth) / (probs.sum() + targets.sum() + smooth)
