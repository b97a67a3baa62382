"""Explicit inputs: the topic (spec and reference code) reaches every stage through topic_brief,
earlier rounds through the one record store, and no stage reads either from disk on its own."""
import re

import dagster as dg
import pytest

from assets import ALL_ASSETS, ROUND_ASSETS
from assets.baseline_results.defs import baseline_results
from assets.ideas.defs import ideas
from assets.paper_rankings.defs import paper_rankings
from assets.papers.defs import papers
from assets.round_reference.defs import round_reference
from assets.shared.partitions import multi_key
from assets.shared.topics import (
    captured,
    code_sha256,
    spec_and_code_from_json,
    topic_of,
    topic_spec,
)
from assets.topic_brief.defs import topic_brief
from resources.store import RecordIOManager, RecordStore
from schemas.frames import from_frame, to_frame
from schemas.records import Feedback, FilteredIdea, Patch, TopicBrief
from tests.support import paths
from tests.support.paths import FIXTURES
from tests.support.resources import make_resources

TOPIC = "toy_classification"
ROOT = paths.REPO


def _brief(spec, code: str) -> TopicBrief:
    from assets.shared.topics import captured_fields

    return TopicBrief(topic=spec.name, title=spec.title, description=spec.description, metric_name="accuracy",
                      metric_goal="maximize", task="t", input="i", output="o", domain="d", evaluation="e",
                      search_query="q", **captured_fields(spec, code))


def test_brief_round_trips_the_spec_and_the_code(home):
    spec = topic_spec(TOPIC)
    code = spec.code_path.read_text()
    t = topic_of(to_frame([_brief(spec, code)], TopicBrief))
    assert t.spec == spec and t.spec.dir == spec.dir and t.code == code
    assert t.code_sha256 == code_sha256(code) and len(t.code_sha256) == 64
    carried, carried_code = spec_and_code_from_json(t.to_json())  # what the per-idea steps get
    assert carried == spec and carried_code == code and carried.budget.ideas_per_round == 3


def test_brief_without_a_capture_or_with_other_code_is_refused(home):
    spec = topic_spec(TOPIC)
    old = _brief(spec, "x = 1\n").model_copy(update={"spec_json": "", "code": "", "code_sha256": ""})
    with pytest.raises(ValueError, match="materialise topic_brief again"):
        captured(old)
    tampered = _brief(spec, "x = 1\n").model_copy(update={"code": "x = 2\n"})
    with pytest.raises(ValueError, match="does not match its sha256"):
        captured(tampered)


def test_stale_reason_names_what_changed_on_disk(home):
    from assets.shared.topics import stale_reason

    spec = topic_spec(TOPIC)
    df = to_frame([_brief(spec, spec.code_path.read_text())], TopicBrief)
    assert stale_reason(df, spec) is None
    assert stale_reason(None, spec) == "no topic_brief yet"
    old = _brief(spec, "x").model_copy(update={"spec_json": ""})
    assert "predates" in stale_reason(to_frame([old], TopicBrief), spec)
    folder = home / "experiments" / TOPIC
    (folder / "experiment.py").write_text(spec.code_path.read_text() + "\n# edited\n")
    assert stale_reason(df, topic_spec(TOPIC)) == "experiment.py changed since topic_brief"
    (folder / "topic.yaml").write_text((folder / "topic.yaml").read_text().replace("papers: 8", "papers: 9"))
    assert stale_reason(df, topic_spec(TOPIC)) == "topic.yaml changed since topic_brief"


def test_no_stage_reads_the_topic_or_the_store_behind_its_inputs():
    """topic_spec() only in topic_brief; no Store() built in assets; no slicing of llm.calls()."""
    offenders = []
    for f in sorted((ROOT / "assets").rglob("*.py")):
        rel = f.relative_to(ROOT).as_posix()
        text = f.read_text()
        if re.search(r"\btopic_spec\(", text) and rel not in ("assets/shared/topics.py", "assets/topic_brief/defs.py"):
            offenders.append(f"{rel}: topic_spec()")
        if re.search(r"\bStore\(", text):
            offenders.append(f"{rel}: Store()")
        if re.search(r"\.calls\(\)", text):
            offenders.append(f"{rel}: llm.calls()")
        if re.search(r"\bstatus_of\(", text) \
                and rel != "assets/editing/edit_formats/base.py":
            offenders.append(f"{rel}: status_of()")
    assert offenders == []


def _materialize(instance, resources, selection, key):
    return dg.materialize(ALL_ASSETS, selection=selection, partition_key=str(key), instance=instance,
                          resources=resources, raise_on_error=False)


def test_an_edit_mid_round_waits_for_the_next_topic_brief(home, fake_llm, tmp_path):
    """Materialise the first stages of a round, edit topic.yaml (ideas per round, tolerance) and
    the reference file, materialise the rest: the round keeps the spec and code it started with.
    The records live under a non-default root: every stage reads and writes through the one
    record store resource."""
    store = RecordStore(root=str(tmp_path / "records_elsewhere"))
    resources = {**make_resources(fake_llm.base_url), "store": store, "io_manager": RecordIOManager(store=store)}
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("topics", [TOPIC])
    instance.add_dynamic_partitions("rounds", ["r1", "r2"])
    assert _materialize(instance, resources, [topic_brief, baseline_results], TOPIC).success
    first = [round_reference, papers, paper_rankings, ideas]
    rest = [a for a in ROUND_ASSETS if a not in first]
    r1 = multi_key(TOPIC, "r1")
    assert _materialize(instance, resources, first, r1).success
    original = (FIXTURES / TOPIC / "experiment.py").read_text()
    brief0 = from_frame(store.read("topic_brief", TOPIC), TopicBrief)[0]
    assert brief0.code == original and brief0.code_sha256 == code_sha256(original)

    folder = home / "experiments" / TOPIC
    yaml = (folder / "topic.yaml").read_text()
    assert "ideas_per_round: 3" in yaml and "tolerance: 0.005" in yaml
    (folder / "topic.yaml").write_text(yaml.replace("ideas_per_round: 3", "ideas_per_round: 1")
                                       .replace("tolerance: 0.005", "tolerance: 0.9"))
    edited = original + "\nEDITED_MID_ROUND = True\n"
    (folder / "experiment.py").write_text(edited)
    assert topic_spec(TOPIC).budget.ideas_per_round == 1  # the disk says 1 from now on

    assert _materialize(instance, resources, rest, r1).success
    kept = [i for i in from_frame(store.read("filtered_ideas", TOPIC, "r1"), FilteredIdea) if i.kept]
    assert len(kept) == 3  # the captured ideas_per_round (3), not the edited 1
    patches = from_frame(store.read("patched_code", TOPIC, "r1"), Patch)
    ok = [p for p in patches if p.status == "ok"]
    assert ok and all("EDITED_MID_ROUND" not in p.code for p in ok)  # edits of the captured code
    fb = {f.name: f for f in from_frame(store.read("feedback_summary", TOPIC, "r1"), Feedback)}
    # the captured tolerance 0.005: a drop of more than 0.005 is a decline (0.9 would make it maintenance)
    neg = fb["negative_step_r1"]
    assert neg.verdict == "decline" and abs(neg.delta) < 0.9

    def meta(asset):
        return instance.get_latest_materialization_event(dg.AssetKey(asset)).asset_materialization

    for asset in ("ideas", "filtered_ideas", "experiment_plans", "patched_code", "feedback_summary"):
        assert meta(asset).metadata["topic_code_sha256"].value == brief0.code_sha256, asset
    assert not (home / "dagster_home" / "records").exists()  # nothing used the default root

    # the baseline refuses to run reference code other than the captured one
    assert not _materialize(instance, resources, [baseline_results], TOPIC).success

    # a new topic_brief captures the edit, and the next round uses it
    version0 = meta("topic_brief").tags["dagster/data_version"]
    assert _materialize(instance, resources, [topic_brief], TOPIC).success
    brief1 = from_frame(store.read("topic_brief", TOPIC), TopicBrief)[0]
    assert brief1.code == edited and meta("topic_brief").metadata["code_sha256"].value == code_sha256(edited)
    assert meta("topic_brief").tags["dagster/data_version"] != version0
    assert topic_of(store.read("topic_brief", TOPIC)).spec.budget.ideas_per_round == 1
    assert _materialize(instance, resources, [round_reference, papers, paper_rankings, ideas,
                                              next(a for a in ROUND_ASSETS if a.key.path[-1] == "filtered_ideas")],
                        multi_key(TOPIC, "r2")).success
    assert meta("ideas").metadata["requested"].value == 1
    assert "r1|toy_classification" in str(meta("ideas").metadata["reads_partitions"].value)  # via the store
    assert meta("ideas").metadata["topic_code_sha256"].value == code_sha256(edited)
    assert sum(i.kept for i in from_frame(store.read("filtered_ideas", TOPIC, "r2"), FilteredIdea)) <= 1
