import dagster as dg

from assets import ROUND_ASSETS, TOPIC_ASSETS
from assets.partitions import round_x_topic, topic_partitions

topic_setup_job = dg.define_asset_job(
    "topic_setup", selection=dg.AssetSelection.assets(*TOPIC_ASSETS), partitions_def=topic_partitions,
    description="A topic's brief (task attributes) and the baseline run of its reference code.")
research_round_job = dg.define_asset_job(
    "research_round", selection=dg.AssetSelection.assets(*ROUND_ASSETS), partitions_def=round_x_topic,
    description="One round of the loop for one topic: papers -> rankings -> ideas -> filter -> plans -> "
                "patches -> runs -> feedback.")
