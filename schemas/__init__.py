"""Pydantic models of every record the loop produces; also the LLM's JSON schemas."""
from schemas import llm_outputs
from schemas.records import (
    Attempt,
    ExperimentPlan,
    Feedback,
    FilteredIdea,
    Idea,
    Paper,
    PaperScore,
    Patch,
    RunResult,
    TopicBrief,
    TraceFrame,
)
from schemas.topic import (
    Budget,
    MetricSpec,
    TopicSpec,
    TopicSpecError,
    discover_topics,
    load_topic,
)

__all__ = [
    "Budget", "MetricSpec", "TopicSpec", "TopicSpecError", "load_topic", "discover_topics",
    "Attempt", "ExperimentPlan", "Feedback", "FilteredIdea", "Idea", "Paper", "PaperScore",
    "Patch", "RunResult", "TopicBrief", "TraceFrame", "llm_outputs",
]
