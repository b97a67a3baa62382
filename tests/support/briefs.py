"""A topic_brief record as the set-up stores it (the captured spec and code), for tests that
fake a finished set-up without running it."""
from __future__ import annotations

from assets.shared.topics import captured_fields
from resources.store import Store
from schemas.frames import to_frame
from schemas.records import TopicBrief
from schemas.topic import TopicSpec


def store_brief(spec: TopicSpec, store: Store | None = None) -> None:
    brief = TopicBrief(topic=spec.name, title=spec.title, description=spec.description, metric_name=spec.metric.name,
                       metric_goal=spec.metric.goal, code_excerpt="", task="t", input="i", output="o", domain="d",
                       evaluation="e", search_query="q", **captured_fields(spec, spec.code_path.read_text()))
    (store or Store()).write(to_frame([brief], TopicBrief), "topic_brief", spec.name)
