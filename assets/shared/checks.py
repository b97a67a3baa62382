"""Data expectations through great-expectations 1.x, wrapped as Dagster asset checks.

There is no maintained Dagster integration for GX 1.x, so each check builds its batch in one
ephemeral GX context per process (GX is imported lazily: it costs seconds). polars -> pandas
happens here, at the boundary. Conditions that span columns are passed in as derived boolean
columns (e.g. `kept_matches_score`) and expected to be all true."""

from __future__ import annotations

import itertools
from typing import Any

import dagster as dg
import polars as pl

_CTX: dict[str, Any] = {}


_COUNTER = itertools.count()


def _context():
    if "ctx" not in _CTX:
        import great_expectations as gx
        from great_expectations.data_context.types.base import ProgressBarsConfig

        ctx = gx.get_context(mode="ephemeral")
        ctx.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)
        _CTX["gx"] = gx
        _CTX["ctx"] = ctx
        _CTX["ds"] = ctx.data_sources.add_pandas(name="researchloop")
    return _CTX["gx"], _CTX["ds"]


def E(kind: str, **kwargs) -> tuple[str, dict]:
    """An expectation by its GX class name, e.g. E("ExpectColumnValuesToNotBeNull", column="summary")."""
    return kind, kwargs


def run_expectations(df: pl.DataFrame, expectations: list[tuple[str, dict]]) -> list[dict]:
    gx, ds = _context()
    cols = sorted({kw["column"] for _, kw in expectations if "column" in kw} & set(df.columns))
    pdf = df.select(cols).to_pandas() if cols else df.select([]).to_pandas()
    if not cols:
        import pandas as pd

        pdf = pd.DataFrame(index=range(df.height))
    n = next(_COUNTER)
    asset = ds.add_dataframe_asset(name=f"frame_{n}")
    batch = asset.add_batch_definition_whole_dataframe(f"batch_{n}").get_batch(
        batch_parameters={"dataframe": pdf})
    out = []
    for kind, kw in expectations:
        if "column" in kw and kw["column"] not in df.columns:
            out.append({"expectation": kind, **kw, "success": False, "detail": "column missing"})
            continue
        res = batch.validate(getattr(gx.expectations, kind)(**kw))
        r = res.result or {}
        out.append({"expectation": kind, **{k: v for k, v in kw.items() if k != "value_set"},
                    "success": bool(res.success),
                    "unexpected": r.get("unexpected_count", r.get("observed_value", ""))})
    return out


def expectation_check(check_name: str, df: pl.DataFrame, expectations: list[tuple[str, dict]],
                      asset_key: str | None = None, **extra_metadata) -> dg.AssetCheckResult:
    results = run_expectations(df, expectations)
    passed = all(r["success"] for r in results)
    lines = ["| expectation | column | ok | unexpected |", "|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r['expectation']} | {r.get('column', '')} | {'yes' if r['success'] else 'NO'} "
                     f"| {r.get('unexpected', '')} |")
    return dg.AssetCheckResult(
        check_name=check_name, asset_key=asset_key, passed=passed,
        metadata={"rows": df.height, "expectations": dg.MetadataValue.md("\n".join(lines)), **extra_metadata},
    )
