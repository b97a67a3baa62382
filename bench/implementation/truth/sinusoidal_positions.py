import torch


def sinusoidal_positions(n_positions: int, d_model: int) -> torch.Tensor:
    pos = torch.arange(n_positions, dtype=torch.float32)[:, None]
    i = torch.arange(0, d_model, 2, dtype=torch.float32)
    angle = pos / 10000 ** (i / d_model)
    pe = torch.zeros(n_positions, d_model)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)
    return pe
