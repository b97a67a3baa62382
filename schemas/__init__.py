"""Pydantic models of every record the loop produces; also the LLM's JSON schemas."""
from schemas.topic import Budget, MetricSpec, TopicSpec, TopicSpecError, load_topic, discover_topics
from schemas.records import (
    Attempt, ExperimentPlan, Feedback, FilteredIdea, Idea, Paper, PaperScore, Patch,
    RunResult, TopicBrief, TraceFrame,
)
from schemas import llm_outputs

__all__ = [
    "Budget", "MetricSpec", "TopicSpec", "TopicSpecError", "load_topic", "discover_topics",
    "Attempt", "ExperimentPlan", "Feedback", "FilteredIdea", "Idea", "Paper", "PaperScore",
    "Patch", "RunResult", "TopicBrief", "TraceFrame", "llm_outputs",
]
