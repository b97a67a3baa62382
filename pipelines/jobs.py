"""The code location's two asset jobs. The resources are bound in pipelines/definitions.py; the
CLI resolves the bound jobs through pipelines/launch.py, the sensors name these."""
import dagster as dg

from assets import ROUND_ASSETS, TOPIC_ASSETS
from assets.shared.partitions import round_x_topic, topic_partitions
from resources.devices import parallel_limit

topic_setup_job = dg.define_asset_job(
    "topic_setup", selection=dg.AssetSelection.assets(*TOPIC_ASSETS), partitions_def=topic_partitions,
    description="A topic's brief (task attributes) and the baseline run of its reference code.")

# the stages of a round follow one another; only the per-idea steps of run_results run side by
# side, at most parallel_limit() at once (RESEARCHLOOP_MAX_PARALLEL, else GPUs, else cores)
research_round_job = dg.define_asset_job(
    "research_round", selection=dg.AssetSelection.assets(*ROUND_ASSETS), partitions_def=round_x_topic,
    config={"execution": {"config": {"multiprocess": {"max_concurrent": parallel_limit()}}}},
    description="One round of the loop for one topic: papers -> rankings -> ideas -> filter -> plans -> "
                "patches -> runs (one step per idea) -> feedback.")

