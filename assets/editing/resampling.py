"""Asking an edit again, sampled, when the answer could not be used (no change, did not apply)."""

from __future__ import annotations

NO_OP_RESAMPLES = 2          # an edit that changed nothing is asked again, sampled, this many times


RESAMPLE_TEMPERATURE = 0.8


def complete_resampled(llm, messages: list[dict], *, resample_on: tuple[str, ...] = ("no_op",), round: int = 0,
                       **kw):
    """llm.complete(messages, **kw); when the answer failed with one of the `resample_on` edit
    statuses (the result's `error_kind`), the same question again with sampling (temperature RESAMPLE_TEMPERATURE, seeds
    1..NO_OP_RESAMPLES, no retries each). Near-greedy decoding makes the small model repeat its
    answer however the error is put to it. `round` k > 0 asks the same question once more after
    earlier rounds failed: sampled from the start, with seeds no earlier round used.
    Returns (result, resamples asked)."""
    per_round = NO_OP_RESAMPLES + 1
    res, k = None, 0
    for ask in range(round * per_round, (round + 1) * per_round):  # ask 0 is greedy; each later one its seed
        if res is not None and (res.ok or res.error_kind not in resample_on):
            break
        sampling = {} if ask == 0 else {"temperature": RESAMPLE_TEMPERATURE, "seed": ask}
        res = llm.complete(messages, **{**kw, **sampling, **({} if res is None else {"max_retries": 0})})
        k += ask != 0
    return res, k

