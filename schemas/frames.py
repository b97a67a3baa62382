"""Records <-> polars DataFrames with an explicit schema derived from the pydantic model.

Scalars and lists of strings become native Parquet columns; nested records and dicts are
stored as JSON text so every file is readable by any Parquet tool."""
from __future__ import annotations

import json
import types
import typing
from typing import Any, Literal, get_args, get_origin

import polars as pl
from pydantic import BaseModel


def _strip_optional(tp: Any) -> Any:
    if get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return tp


def _dtype(tp: Any) -> pl.DataType | None:
    """polars dtype for a field annotation, or None for JSON-encoded fields."""
    tp = _strip_optional(tp)
    if get_origin(tp) is Literal:
        return pl.String()
    if tp is str:
        return pl.String()
    if tp is bool:
        return pl.Boolean()
    if tp is int:
        return pl.Int64()
    if tp is float:
        return pl.Float64()
    if get_origin(tp) is list and get_args(tp) and get_args(tp)[0] is str:
        return pl.List(pl.String())
    return None


def frame_schema(model: type[BaseModel]) -> dict[str, pl.DataType]:
    return {name: (_dtype(f.annotation) or pl.String()) for name, f in model.model_fields.items()
            if not f.exclude}


def to_frame(records: typing.Sequence[BaseModel], model: type[BaseModel]) -> pl.DataFrame:
    schema = frame_schema(model)
    json_fields = {n for n, f in model.model_fields.items() if _dtype(f.annotation) is None}
    rows = []
    for r in records:
        d = r.model_dump(mode="json")
        for n in json_fields:
            d[n] = json.dumps(d[n])
        rows.append({k: d.get(k) for k in schema})
    return pl.DataFrame(rows, schema=schema, orient="row") if rows else pl.DataFrame(schema=schema)


def from_frame(df: pl.DataFrame, model: type[BaseModel]) -> list[BaseModel]:
    json_fields = {n for n, f in model.model_fields.items() if _dtype(f.annotation) is None}
    out = []
    for row in df.to_dicts():
        for n in json_fields:
            if n in row and isinstance(row[n], str):
                row[n] = json.loads(row[n])
        out.append(model.model_validate(row))
    return out
