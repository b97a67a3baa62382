"""The topic brief: the spec plus the task attributes the LLM extracts (DOLPHIN 3.1)."""
from assets.shared.topics import captured_fields
from assets.topic_brief import prompts
from resources.llm import LLM
from schemas.llm_outputs import TaskAttributes
from schemas.records import TopicBrief


def build_brief(spec, llm: LLM) -> tuple[TopicBrief, object]:
    res = llm.complete(prompts.task_attributes(spec.title, spec.description, spec.metric.name),
                       stage="topic_brief", schema=TaskAttributes, max_tokens=300)
    if res.ok:
        a: TaskAttributes = res.value
        attrs = a.model_dump()
    else:  # honest fallback: the topic's own words, with the failure recorded in llm_error
        attrs = {"task": spec.title, "input": "unknown", "output": "unknown", "domain": "unknown",
                 "evaluation": spec.metric.name, "search_query": spec.title}
    code = spec.code_path.read_text()  # read once: the brief carries it to every later stage
    brief = TopicBrief(topic=spec.name, title=spec.title, description=spec.description.strip(),
                       metric_name=spec.metric.name, metric_goal=spec.metric.goal,
                       code_excerpt=code[:6000], llm_error=res.error, **attrs, **captured_fields(spec, code))
    return brief, res
