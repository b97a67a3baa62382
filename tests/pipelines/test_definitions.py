"""The code location loads, with the asset keys, checks, jobs and sensors the design names."""
import dagster as dg

from pipelines.definitions import defs

ROUND = ["round_reference", "papers", "paper_rankings", "ideas", "filtered_ideas", "experiment_plans",
         "patched_code", "run_results", "feedback_summary", "best_code"]


def test_definitions_load_and_name_every_asset():
    dg.Definitions.validate_loadable(defs)
    graph = defs.resolve_asset_graph()
    keys = {k.to_user_string() for k in graph.get_all_asset_keys()}
    assert keys == {"topic_brief", "baseline_results", *ROUND}
    for name in ROUND:
        pd = graph.get(dg.AssetKey(name)).partitions_def
        assert isinstance(pd, dg.MultiPartitionsDefinition)
        assert {d.name for d in pd.partitions_defs} == {"topic", "round"}
    for name in ("topic_brief", "baseline_results"):
        assert isinstance(graph.get(dg.AssetKey(name)).partitions_def, dg.DynamicPartitionsDefinition)


def test_every_asset_has_a_check():
    checked = {k.asset_key.to_user_string() for k in defs.resolve_asset_graph().asset_check_keys}
    assert checked == {"topic_brief", "baseline_results", *ROUND}


def test_jobs_and_sensors():
    assert defs.resolve_job_def("research_round") is not None
    assert defs.resolve_job_def("topic_setup") is not None
    # off unless RESEARCHLOOP_SENSORS=1 (tests/pipelines/test_operations.py)
    for name in ("topic_sensor", "round_sensor"):
        s = defs.resolve_sensor_def(name)
        assert s.default_status == dg.DefaultSensorStatus.STOPPED


def test_round_assets_read_the_topic_of_their_partition():
    graph = defs.resolve_asset_graph()
    papers = graph.get(dg.AssetKey("papers"))
    assert dg.AssetKey("topic_brief") in papers.parent_keys
    key = dg.MultiPartitionKey({"topic": "t1", "round": "r2"})
    assert str(key) == "r2|t1"  # dimensions are ordered by name, as the docs and CLI say


def test_loading_the_code_location_imports_no_heavy_library():
    import subprocess
    import sys

    code = ("import sys, pipelines.definitions; "
            "print([m for m in ('torch', 'sentence_transformers', 'great_expectations', 'mlflow', 'openai') "
            "if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
