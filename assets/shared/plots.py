"""The topic's progress as a picture: best metric vs the baseline, improvement rate and LLM
cost/tokens per round (matplotlib, imported on use, rendered off-screen)."""

from __future__ import annotations

import io
from collections.abc import Sequence


def progress_png(rows: Sequence[dict], metric: str, title: str) -> bytes:
    """rows: one dict per round with round, ideas, improvement, best, baseline, tokens, cost_usd."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rounds = [r["round"] for r in rows]
    x = list(range(len(rows)))
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.4))
    ax = axes[0]
    best = [r.get("best") for r in rows]
    ax.plot([i for i, b in zip(x, best) if b is not None], [b for b in best if b is not None], "o-", label="best idea")
    base = [r.get("baseline") for r in rows]
    ax.plot([i for i, b in zip(x, base) if b is not None], [b for b in base if b is not None], "k--", label="baseline")
    ax.set_title(f"best {metric}")
    ax.legend(fontsize=8)
    ax = axes[1]
    rate = [(r["improvement"] / r["ideas"]) if r.get("ideas") else 0.0 for r in rows]
    ax.bar(x, rate, color="tab:green")
    ax.set_ylim(0, 1)
    ax.set_title("improvement rate")
    for i, r in zip(x, rows):
        ax.annotate(f"{r['improvement']}/{r['ideas']}", (i, rate[i]), ha="center", va="bottom", fontsize=8)
    ax = axes[2]
    ax.bar(x, [r.get("tokens", 0) for r in rows], color="tab:blue")
    ax.set_title("LLM tokens (bars) and cost USD (line)")
    twin = ax.twinx()
    twin.plot(x, [r.get("cost_usd", 0.0) for r in rows], "r.-")
    for a in axes:
        a.set_xticks(x, rounds)
    fig.suptitle(title)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    return buf.getvalue()
