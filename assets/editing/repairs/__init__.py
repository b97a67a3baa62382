"""The mechanical repair rules as a registry: each turns one kind of error message into one edit
of the failing code, without the LLM (one module per rule: its `RULE`, with a name, a one-line
description and `apply(Failure) -> Candidate | None`). `suggested_fix`
(assets/editing/suggestions.py) walks RULES in order and keeps the first candidate; adding a
rule is one module here plus its place in RULES. The order is part of the behaviour: an import
a library provides goes before a close defined name, a rename before a guessed value."""
from __future__ import annotations

from assets.editing.repairs import (
    batch_first,
    class_count,
    closest_name,
    concat_dim,
    conv_channels,
    detach_numpy,
    embedding_size,
    extra_positional,
    feature_matrix,
    flatten_batch,
    forgotten_import,
    inplace_grad,
    input_dtype,
    interpreter,
    keep_dims,
    keyword,
    linear_in,
    missing_folder,
    missing_import,
    module_call,
    module_list,
    moved_import,
    parameter_value,
    shadowed_import,
    split_names,
    target_dtype,
    task_sibling,
    uncalled_method,
    view_size,
)
from assets.editing.repairs.base import Candidate, Failure, Rule

RULES: tuple[Rule, ...] = tuple(m.RULE for m in (
    forgotten_import, missing_import, task_sibling, missing_folder, shadowed_import,
    keyword, extra_positional, module_call, inplace_grad, detach_numpy, uncalled_method, moved_import, interpreter,
    closest_name, parameter_value, target_dtype, module_list, input_dtype, feature_matrix, class_count, embedding_size,
    view_size, flatten_batch, linear_in, conv_channels, concat_dim, keep_dims, split_names, batch_first))

__all__ = ["RULES", "Candidate", "Failure", "Rule", "rule"]


def rule(name: str) -> Rule:
    try:
        return next(r for r in RULES if r.name == name)
    except StopIteration:
        raise ValueError(f"unknown repair rule {name!r} (known: {', '.join(r.name for r in RULES)})") from None
