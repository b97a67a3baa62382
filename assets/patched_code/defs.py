"""patched_code (DOLPHIN 3.2): edit a copy of the reference file per idea."""
import dagster as dg
import polars as pl

from assets.experiment_plans.planning import kept_ideas
from assets.patched_code.patching import make_patch, patch_format, without_repeated_programs
from assets.round_reference.reference import reference_metadata, reference_of
from assets.shared.checks import E, expectation_check
from assets.shared.metadata import md_table, topic_metadata, usage_metadata
from assets.shared.partitions import round_asset
from assets.shared.topics import topic_of
from resources.llm import LLM
from resources.runner import Runner
from schemas.frames import from_frame, to_frame
from schemas.records import ExperimentPlan, Patch


@round_asset(
    "patches_compile", "every applied patch compiles and changes the file",
    "Per idea: the edit (diff), the patched file and its self-check.",
    topic_inputs=("topic_brief",),
)
def patched_code(context: dg.AssetExecutionContext, experiment_plans: pl.DataFrame, filtered_ideas: pl.DataFrame,
                 topic_brief: pl.DataFrame, round_reference: pl.DataFrame, llm: LLM, runner: Runner):
    captured = topic_of(topic_brief)
    rt = reference_of(topic_brief, round_reference)
    spec, code = captured.spec, rt.code  # edits apply to the round's reference code (the best so far, or the original)
    ideas_by_id = {i.idea_id: i for i in kept_ideas(filtered_ideas)}
    plans = from_frame(experiment_plans, ExperimentPlan)
    with llm.track("patched_code") as usage:
        # the ideas' prompts share the file, the data and the rules: on the local server the first idea
        # that asks it goes alone, so that part is cached before the others read it side by side; an
        # endpoint of its own drafts them all side by side (each idea has its own workspace and memos)
        patches = llm.map(lambda plan: make_patch(spec, code, ideas_by_id[plan.idea_id], plan, llm, runner), plans,
                          shared_prefix=True)
    for plan, p in zip(plans, patches):
        context.log.info(f"{plan.name}: {p.status}" + (f" ({p.reason})" if p.reason else ""))
    deduped = without_repeated_programs(patches)  # an idea written as the same program as an earlier one
    for before, p in zip(patches, deduped):
        if p is not before:
            context.log.info(f"{p.idea_id}: {p.status} ({p.reason})" if p.status != "ok" else
                             f"{p.idea_id}: a draft repeats another idea's program; draft(s) left: "
                             f"{sum(d.status == 'ok' for d in p.drafts)}")
    patches = deduped
    df = to_frame(patches, Patch)
    check = expectation_check("patches_compile", df.with_columns(
        ok_compiles=(pl.col("status") != "ok") | (pl.col("compiles") & (pl.col("diff").str.len_chars() > 0))), [
        E("ExpectColumnValuesToBeInSet", column="status",
          value_set=["ok", "no_op", "not_applied", "syntax_error", "dishonest", "llm_failed"]),
        E("ExpectColumnValuesToBeInSet", column="ok_compiles", value_set=[True]),
    ], asset_key="patched_code")
    return dg.MaterializeResult(value=df, check_results=[check], metadata={
        "applied": sum(p.status == "ok" for p in patches), "failed": sum(p.status != "ok" for p in patches),
        "edit_format": patch_format(llm),
        # the implementation search: drafts asked, usable, dropped as the same program, changing nothing
        "drafts": sum(len(p.drafts) for p in patches),
        "drafts_viable": sum(d.status == "ok" for p in patches for d in p.drafts),
        "drafts_duplicate": sum(d.status == "duplicate" for p in patches for d in p.drafts),
        "drafts_no_op": sum(d.status == "no_op" for p in patches for d in p.drafts),
        "patches": dg.MetadataValue.md(md_table([{**p.model_dump(), "diff_lines": p.diff.count("\n")} for p in patches],
                                                ["idea_id", "status", "diff_lines", "imports_ok", "reason"])),
        **usage_metadata(usage, by_idea=True), **topic_metadata(captured), **reference_metadata(rt),
    })
