"""Stored values: every asset's records as Parquet under $DAGSTER_HOME/records/, laid out
(Dagster keeps its own compute logs under $DAGSTER_HOME/storage/)
  records/<asset>/<topic>.parquet            (topic-partitioned assets)
  records/<asset>/<topic>/<round>.parquet    (topic x round assets)
`RecordStore` is the one resource that owns the location: the IO manager (`RecordIOManager`)
writes and loads through it, the stages that look across rounds (ideas, filtered_ideas,
feedback_summary) read earlier rounds through it, and the sensors, the CLI and lineage get the
same one from `record_store()`. `Store` is the plain object behind it (a folder of Parquet files)."""
from __future__ import annotations

from pathlib import Path

import dagster as dg
import polars as pl
from pydantic import Field

from resources.paths import dagster_home
from resources.safe_io import atomic_write


def round_number(round_key: str) -> int:
    if not (round_key.startswith("r") and round_key[1:].isdigit()):
        raise ValueError(f"round keys look like r1, r2, ...; got {round_key!r}")
    return int(round_key[1:])


class Store:
    def __init__(self, root: str | Path | None = None):
        self.root = Path(root) if root else dagster_home() / "records"

    def path(self, asset: str, topic: str, round_key: str | None = None) -> Path:
        if round_key is None:
            return self.root / asset / f"{topic}.parquet"
        return self.root / asset / topic / f"{round_key}.parquet"

    def write(self, df: pl.DataFrame, asset: str, topic: str, round_key: str | None = None) -> Path:
        # a private temp file renamed into place: a kill mid-write leaves no part-written record,
        # and no temp named like a record (`<topic>.tmp.parquet` was listed by topics() as a topic)
        return atomic_write(self.path(asset, topic, round_key), df.write_parquet)

    def read(self, asset: str, topic: str, round_key: str | None = None) -> pl.DataFrame | None:
        p = self.path(asset, topic, round_key)
        return pl.read_parquet(p) if p.exists() else None

    def rounds(self, asset: str, topic: str) -> list[str]:
        d = self.root / asset / topic
        if not d.is_dir():
            return []
        keys = [p.stem for p in d.glob("r*.parquet") if p.stem[1:].isdigit()]
        return sorted(keys, key=round_number)

    def topics(self, asset: str = "topic_brief") -> list[str]:
        d = self.root / asset
        return sorted(p.stem for p in d.glob("*.parquet")) if d.is_dir() else []


class RecordStore(dg.ConfigurableResource):
    """The stored records of every asset, as a Dagster resource: one configuration (the root) for
    the IO manager, the stages that read earlier rounds and the tools that read records outside
    a run."""

    root: str = Field(default="", description="empty: $DAGSTER_HOME/records")

    def open(self) -> Store:
        return Store(self.root or None)

    def path(self, asset: str, topic: str, round_key: str | None = None) -> Path:
        return self.open().path(asset, topic, round_key)

    def write(self, df: pl.DataFrame, asset: str, topic: str, round_key: str | None = None) -> Path:
        return self.open().write(df, asset, topic, round_key)

    def read(self, asset: str, topic: str, round_key: str | None = None) -> pl.DataFrame | None:
        return self.open().read(asset, topic, round_key)

    def rounds(self, asset: str, topic: str) -> list[str]:
        return self.open().rounds(asset, topic)

    def topics(self, asset: str = "topic_brief") -> list[str]:
        return self.open().topics(asset)


def record_store() -> RecordStore:
    """The record store as the code location configures it (pipelines/definitions.py uses this
    too), for code outside a run: sensors, the CLI, lineage."""
    return RecordStore()


def split_partition_key(key) -> tuple[str, str | None]:
    """(topic, round) from a Dagster partition key: 'pointcloud' or 'r1|pointcloud'."""
    if isinstance(key, dg.MultiPartitionKey):
        d = key.keys_by_dimension
        return d["topic"], d["round"]
    if "|" in str(key):  # dimensions are ordered by name: round|topic
        round_key, topic = str(key).split("|", 1)
        return topic, round_key
    return str(key), None


class RecordIOManager(dg.ConfigurableIOManager):
    """Writes each asset's DataFrame to the record store and loads it back for the next stage."""

    store: RecordStore = Field(default_factory=RecordStore, description="where the records live")

    def _store(self) -> Store:
        return self.store.open()

    def handle_output(self, context: dg.OutputContext, obj: pl.DataFrame) -> None:
        if obj is None:
            return
        if not isinstance(obj, pl.DataFrame):
            raise TypeError(f"{context.asset_key.to_user_string()} must be a polars DataFrame, got {type(obj)}")
        topic, round_key = split_partition_key(context.asset_partition_key)
        p = self._store().write(obj, context.asset_key.path[-1], topic, round_key)
        context.add_output_metadata({"path": dg.MetadataValue.path(str(p))})

    def load_input(self, context: dg.InputContext) -> pl.DataFrame:
        topic, round_key = split_partition_key(context.asset_partition_key)
        asset = context.asset_key.path[-1]
        df = self._store().read(asset, topic, round_key)
        if df is None:
            raise FileNotFoundError(f"{asset} has no stored value for {context.asset_partition_key}; "
                                    "materialise it first")
        return df
