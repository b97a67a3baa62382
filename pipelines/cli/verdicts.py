"""The verdict table `researchloop run` prints at the end: one line per idea of the rounds it ran."""
from __future__ import annotations

from rich import box
from rich.table import Table
from rich.text import Text

from pipelines.cli.common import plain
from resources.store import record_store
from schemas.frames import from_frame
from schemas.records import Feedback

VERDICT_COLOURS = {"improvement": "green", "maintenance": "yellow", "decline": "red", "failed": "magenta"}


def verdict_row(f, round_key: str, source: str) -> tuple:
    """One idea's row of the end-of-run table: round and idea, its source, the verdict, the metric
    against the code it was judged against (marked * when that is not the baseline) with the 95%
    interval of the difference, and the reason (cut by the table to the width left; the whole of
    it is in the record, the UI and `lineage`)."""

    def one_line(text: str, style: str = "") -> Text:  # names and reasons come from the LLM and scripts
        return Text(" ".join(plain(text).split()), style=style, no_wrap=True, overflow="ellipsis")

    stacked = f.reference not in ("", "baseline")
    if f.metric_value is None:
        metric = "no metric"
    else:
        ref = f.reference_value if f.reference_value is not None else f.baseline_value
        metric = f"{f.metric_value:.4f} vs {ref:.4f}{'*' if stacked else ''}"
        if f.ci_low is not None:
            metric += f" [{f.ci_low:+.4f}, {f.ci_high:+.4f}]"
    reason = f.reason.removeprefix(f"vs {f.reference}: ") if stacked else f.reason  # the caption names it
    return (one_line(f"{round_key} {f.name}"), one_line(source),
            Text(f.verdict, style=VERDICT_COLOURS.get(f.verdict, "")), metric, one_line(reason))


def verdict_table(topic: str, rows: list[tuple], references: dict[str, str] | None = None):
    """The end-of-run verdict table, one line per idea: the idea is cut at 28 characters and the
    reason to the width left (with an ellipsis); source, verdict and metric stay whole.
    `references`: round -> the best code its ideas were judged against, where not the baseline."""
    caption = "\n".join(f"* {rk}: against {ref}" for rk, ref in (references or {}).items()) or None
    table = Table(title=f"{topic}: verdicts against the baseline (*: the best code an idea built on)",
                  caption=caption, caption_justify="left", box=box.SIMPLE_HEAD, title_justify="left",
                  pad_edge=False, collapse_padding=True)
    table.add_column("idea", no_wrap=True, max_width=28)
    table.add_column("source", no_wrap=True)
    table.add_column("verdict", no_wrap=True)
    table.add_column("metric vs baseline [95% CI of diff]", no_wrap=True)
    table.add_column("reason")
    for row in rows:
        table.add_row(*row)
    return table


def print_verdicts(console, topic: str, rounds: list[str]) -> None:
    store = record_store()
    rows, references = [], {}
    for rk in rounds:
        df = store.read("feedback_summary", topic, rk)
        if df is None:
            continue
        ideas = store.read("filtered_ideas", topic, rk)
        sources = (dict(zip(ideas["idea_id"], ideas["source"], strict=True))
                   if ideas is not None and {"idea_id", "source"} <= set(ideas.columns) else {})
        for f in from_frame(df, Feedback):
            rows.append(verdict_row(f, rk, sources.get(f.idea_id, "")))
            if f.reference not in ("", "baseline"):
                value = "" if f.reference_value is None else f" ({f.reference_value:.4f})"
                references[rk] = f"the best code so far, {f.reference}{value}"
    console.print(verdict_table(topic, rows, references))
