"""Planning: the kept ideas of a round and one detailed plan each."""
import polars as pl

from assets.experiment_plans import prompts as plan_prompts
from resources.llm import LLM
from schemas.frames import from_frame
from schemas.llm_outputs import PlanDraft
from schemas.records import ExperimentPlan, FilteredIdea
from schemas.topic import TopicSpec


def make_plan(spec: TopicSpec, code: str, idea: FilteredIdea, llm: LLM) -> ExperimentPlan:
    res = llm.complete(plan_prompts.plan(code, spec.metric.name, idea.name, idea.title, idea.experiment, idea.summary),
                       stage="experiment_plans", schema=PlanDraft, max_tokens=400, item=idea.idea_id)
    if not res.ok:  # a plan is a refinement: fall back to the idea's own experiment text
        return ExperimentPlan(idea_id=idea.idea_id, name=idea.name, changes=[idea.experiment], location="",
                              evaluation=spec.metric.name, expected_effect="", error=res.error)
    p: PlanDraft = res.value
    return ExperimentPlan(idea_id=idea.idea_id, name=idea.name, changes=p.changes or [idea.experiment],
                          location=p.location, evaluation=p.evaluation, expected_effect=p.expected_effect)


def kept_ideas(df: pl.DataFrame) -> list[FilteredIdea]:
    return [i for i in from_frame(df, FilteredIdea) if i.kept]
