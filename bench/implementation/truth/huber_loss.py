import torch


def huber_loss(pred: torch.Tensor, target: torch.Tensor, delta: float = 1.0) -> torch.Tensor:
    err = (pred - target).abs()
    quad = 0.5 * err ** 2
    lin = delta * (err - 0.5 * delta)
    return torch.where(err <= delta, quad, lin).mean()
