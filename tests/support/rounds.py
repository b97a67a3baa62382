"""A whole round materialised in-process with the scripted fake LLM."""
import dagster as dg

from assets import ALL_ASSETS, ROUND_ASSETS, TOPIC_ASSETS
from assets.shared.partitions import multi_key
from assets.shared.topics import topic_spec
from tests.support.briefs import store_brief

TOPIC = "toy_classification"


def materialize_round(instance, resources, round_key: str):
    instance.add_dynamic_partitions("rounds", [round_key])
    return dg.materialize(ALL_ASSETS, selection=ROUND_ASSETS, partition_key=str(multi_key(TOPIC, round_key)),
                          instance=instance, resources=resources)


def materialize_topic(instance, resources):
    """Register the toy topic and materialise its set-up (task attributes, baseline) on `instance`."""
    instance.add_dynamic_partitions("topics", [TOPIC])
    res = dg.materialize(ALL_ASSETS, selection=TOPIC_ASSETS, partition_key=TOPIC, instance=instance,
                         resources=resources)
    assert res.success
    return res


def _setup_materialised(instance):
    instance.add_dynamic_partitions("topics", [TOPIC])
    for asset in ("topic_brief", "baseline_results"):
        instance.report_runless_asset_event(dg.AssetMaterialization(asset, partition=TOPIC))
    store_brief(topic_spec(TOPIC))  # the set-up's record, as it captured the topic
