"""One partition = one topic x one round. Keys look like 'r1|pointcloud_classification'
(Dagster orders the dimensions by name)."""

import warnings

import dagster as dg

topic_partitions = dg.DynamicPartitionsDefinition(name="topics")


round_partitions = dg.DynamicPartitionsDefinition(name="rounds")


round_x_topic = dg.MultiPartitionsDefinition({"topic": topic_partitions, "round": round_partitions})


# multi-partitioned assets read the topic-level assets of their topic
with warnings.catch_warnings():  # beta in 1.13, and exactly the mapping this graph needs
    warnings.simplefilter("ignore")
    TOPIC_OF_ROUND = dg.MultiToSingleDimensionPartitionMapping(partition_dimension_name="topic")


def topic_in(**kw) -> dg.AssetIn:
    return dg.AssetIn(partition_mapping=TOPIC_OF_ROUND, **kw)


def round_key_of(context) -> tuple[str, str]:
    """(topic, round) of a topic x round asset's partition."""
    d = context.partition_key.keys_by_dimension
    return d["topic"], d["round"]


def multi_key(topic: str, round_key: str) -> dg.MultiPartitionKey:
    return dg.MultiPartitionKey({"topic": topic, "round": round_key})


def round_asset(check: str, check_description: str, description: str, topic_inputs: tuple[str, ...] = (),
                kinds: tuple[str, ...] = ("python",)):
    """@dg.asset for a topic x round stage with its blocking data check (yielded by the asset)."""

    def wrap(fn):
        return dg.asset(
            name=fn.__name__, partitions_def=round_x_topic, group_name="round", kinds=set(kinds),
            ins={n: topic_in() for n in topic_inputs}, description=description,
            check_specs=[dg.AssetCheckSpec(check, asset=fn.__name__, blocking=True, description=check_description)],
        )(fn)

    return wrap
