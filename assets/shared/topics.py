"""The topic a stage works on.

`topic_spec(topic)` reads `experiments/<topic>/topic.yaml` from disk: only where a topic is first
read (the `topic_brief` asset, the sensors, the CLI). `topic_brief` records the parsed spec and
the reference code (with its sha256), and every later stage takes both from its `topic_brief`
input (`topic_of`), so an edit of topic.yaml or of the reference file during a round changes
nothing until `topic_brief` is materialised again, and the change shows in the lineage."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

import polars as pl

from resources.paths import resolve_topic_dir
from schemas.frames import from_frame
from schemas.records import TopicBrief
from schemas.topic import TopicSpec, load_topic


def topic_spec(topic: str) -> TopicSpec:
    """The topic as it is on disk now (topic.yaml parsed and validated)."""
    return load_topic(resolve_topic_dir(topic))


def code_sha256(code: str) -> str:
    return hashlib.sha256(code.encode()).hexdigest()


def captured_fields(spec: TopicSpec, code: str) -> dict:
    """What topic_brief records of the topic: the spec (JSON, with the folder it was read from)
    and the reference code with its sha256."""
    return {"spec_json": spec.model_dump_json(), "topic_dir": spec.dir, "code": code, "code_sha256": code_sha256(code)}


@dataclass(frozen=True)
class CapturedTopic:
    """The topic as `topic_brief` captured it: the spec and the reference code it was built from."""
    brief: TopicBrief
    spec: TopicSpec
    code: str

    @property
    def code_sha256(self) -> str:
        return self.brief.code_sha256

    @property
    def spec_sha256(self) -> str:
        return hashlib.sha256(self.brief.spec_json.encode()).hexdigest()

    def to_json(self) -> str:
        """The spec and code as one JSON text (carried in the per-idea steps' job records)."""
        return json.dumps({"spec": self.brief.spec_json, "dir": self.brief.topic_dir, "code": self.code,
                           "code_sha256": self.brief.code_sha256})


def spec_from_json(spec_json: str, topic_dir: str) -> TopicSpec:
    return TopicSpec.model_validate({**json.loads(spec_json), "dir": topic_dir})


def captured(brief: TopicBrief) -> CapturedTopic:
    if not brief.spec_json:
        raise ValueError(f"the topic_brief of {brief.topic} was stored before it recorded the topic spec and "
                         "the reference code: materialise topic_brief again")
    if code_sha256(brief.code) != brief.code_sha256:
        raise ValueError(f"the topic_brief of {brief.topic}: the stored reference code does not match its sha256")
    return CapturedTopic(brief=brief, spec=spec_from_json(brief.spec_json, brief.topic_dir), code=brief.code)


def topic_of(topic_brief: pl.DataFrame) -> CapturedTopic:
    """The spec and the reference code captured in a `topic_brief` input."""
    rows = from_frame(topic_brief, TopicBrief)
    if len(rows) != 1:
        raise ValueError(f"topic_brief must hold one row, got {len(rows)}")
    return captured(rows[0])


def spec_and_code_from_json(text: str) -> tuple[TopicSpec, str]:
    """The inverse of CapturedTopic.to_json (the per-idea steps read their topic from it)."""
    d = json.loads(text)
    if code_sha256(d["code"]) != d["code_sha256"]:
        raise ValueError("the carried reference code does not match its sha256")
    return spec_from_json(d["spec"], d["dir"]), d["code"]


def stale_reason(topic_brief: pl.DataFrame | None, spec: TopicSpec) -> str | None:
    """Why a stored topic_brief no longer matches the topic on disk (`spec`, e.g. from
    topic_spec()), or None when it does: the set-up (topic_brief, then the baseline) must run
    again before a round starts, or the round keeps using the captured spec and code. For the
    sensors and the CLI, which read the topic from disk."""
    if topic_brief is None or topic_brief.is_empty():
        return "no topic_brief yet"
    brief = from_frame(topic_brief, TopicBrief)[0]
    if not brief.spec_json:
        return "topic_brief predates the captured spec and code"
    if spec_from_json(brief.spec_json, brief.topic_dir) != spec:
        return "topic.yaml changed since topic_brief"
    if code_sha256(spec.code_path.read_text()) != brief.code_sha256:
        return f"{spec.code} changed since topic_brief"
    return None
