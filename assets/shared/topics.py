"""The topic spec a stage works on."""
from resources.paths import resolve_topic_dir
from schemas.topic import load_topic


def topic_spec(topic: str):
    return load_topic(resolve_topic_dir(topic))
