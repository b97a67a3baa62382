import math


def cosine_lr(step: int, total_steps: int, base_lr: float, warmup_steps: int, min_lr: float = 0.0) -> float:
    if step < warmup_steps:
        return base_lr * (step + 1) / warmup_steps
    progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
    return min_lr + 0.5 * (base_lr - min_lr) * (1 + math.cos(math.pi * progress))
