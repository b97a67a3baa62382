"""The benchmarks a user runs to judge the loop, by name: `python -m bench NAME [ARGS]` runs one
(`make bench-NAME` is the same), `python -m bench` lists them. Each writes its raw record under
bench/records/ and its sections into its own page, bench/results/NAME.md; bench/RESULTS.md is the
headline table and the index of the pages (bench/results.py)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Benchmark:
    name: str       # `python -m bench NAME`, `make bench-NAME`, bench/results/NAME.md
    module: str     # the module that measures and renders, run as `python -m MODULE ARGS`
    title: str      # its page's heading: the question it answers
    measures: str   # what its figures are
    cost: str       # how long it takes, and whether it asks the LLM
    llm: bool       # asks the LLM: the local model is fetched first unless OPENAI_BASE_URL is set
    no_llm_with: str = ""  # an argument with which it asks no LLM after all


REGISTRY: dict[str, Benchmark] = {b.name: b for b in [
    Benchmark("effectiveness", "bench.effectiveness_bench", "Effectiveness: does the loop find improvements",
              "`researchloop run` for a few rounds on every shipped topic (or the topics named), each on a fresh "
              "DAGSTER_HOME: verified improvements per topic and round, ideas kept and implemented, no-op share, "
              "tokens, wall time and orchestration overhead per idea",
              "hours per topic on the local model", True),
    Benchmark("run", "bench.run_bench", "Loop speed: the shipped topic's baseline and a whole loop (`make bench`)",
              "the shipped topic's baseline run, sandboxed, three times (wall time, whether the metric repeats), "
              "then a two-round `researchloop run` with an empty LLM cache: wall time, tokens per stage",
              "about an hour on the local model", True),
    Benchmark("loop", "bench.loop_bench", "The loop through the sensors in `dagster dev`",
              "`dagster dev` alone on a fresh DAGSTER_HOME: which sensor started every run, and per round the ideas, "
              "verdicts, best metric against the baseline, wall time and tokens",
              "hours on the local model", True),
    Benchmark("repair", "bench.repair_bench", "Repair rate on the broken suites",
              "broken variants of the shipped topics (bench/broken): the share the debugging loop repairs, counted "
              "only when the repaired file's full run scores, per debugging mode, within 2 and 5 repairs",
              "about an hour per suite on the local model", True),
    Benchmark("implementation", "bench.implementation_bench", "Implementation tasks (RD2Bench metrics)",
              "tasks with a ground truth (bench/implementation): execution, format, correlation and accuracy of the "
              "code the model writes, run in the sandbox",
              "about an hour on the local model", True),
    Benchmark("ranking", "bench.ranking_bench", "Paper ranking on labelled candidates",
              "precision and recall of the papers each ranking mode keeps on the labelled development topics, "
              "leave-one-topic-out; `--similarity-only`: the embedding rules on every labelled candidate",
              "hours on the local model; `--similarity-only` minutes, no LLM", True, "--similarity-only"),
    Benchmark("sources", "bench.sources_bench", "Idea sources: which source's ideas improve the code",
              "one topic run with each idea source alone: verified improvements, best gain, tokens per idea, and "
              "how the Idea Arena's ratings rank the measured gains",
              "hours per source on the local model", True),
    Benchmark("round", "bench.round_bench", "Round: where the time goes per stage, one loop and two side by side",
              "one round of a topic (`researchloop run --rounds 1`) from a cold LLM prompt cache, alone and then two "
              "loops side by side: per stage LLM calls, prompt and answer tokens, prompt-processing and decode "
              "seconds, cached tokens, re-asks, experiment and wall seconds; the round's orchestration overhead; "
              "the two loops' wall time over the one loop's",
              "hours on the local model", True),
    Benchmark("debug", "bench.debug_bench", "researchloop debug on broken scripts",
              "`researchloop debug` on suites of small standalone scripts with one classic bug each (bench/broken/"
              "scripts_*): the share whose final version's full run reproduces the bug-free script's result",
              "under an hour per suite on the local model", True),
    Benchmark("slots", "bench.slots_bench", "Slots: requests decoded at once by the local server",
              "the local server with 1, 2 and 4 slots, sent 1, 2 and 4 requests at once (a fixed prompt, a fixed "
              "answer length): aggregate decode tokens per second and each request's latency",
              "minutes to an hour on the local model", True),
    Benchmark("independence", "bench.independence_bench", "Independence filter on labelled idea pairs",
              "the embedding cosine of labelled idea pairs (duplicates and hard non-duplicates): accuracy, "
              "precision and recall of DOLPHIN's threshold and of the best one on the pairs",
              "minutes, no LLM", False),
    Benchmark("filtering", "bench.filtering_bench", "Filtering stage on the local model",
              "fixed ideas through the independence filter and the novelty loop: each idea's outcome, time and "
              "LLM calls",
              "under an hour on the local model", True),
    Benchmark("headroom", "bench.headroom_bench", "Headroom of the tuning source",
              "every one-knob move of a topic's baseline (and pairs of moves), run on the topic's seeds and judged "
              "by the loop's verdict rule: what tuning alone can win",
              "minutes to an hour per topic, no LLM", False),
    Benchmark("null", "bench.null_bench", "Verdicts: false improvements on null ideas",
              "changes that only move the random stream, judged by the verdict rule (the false-improvement rate), "
              "and a small real change (the detection rate)",
              "hours, no LLM", False),
    Benchmark("topics", "bench.topics_bench", "Topic baselines",
              "each shipped topic's baseline, sandboxed: whether seed 0 repeats, the spread over seeds, wall time "
              "and memory",
              "minutes, no LLM", False),
    Benchmark("sandbox", "bench.sandbox_bench", "Sandbox: containment and cost",
              "the hostile suite (tests/resources/sandbox/test_hostile.py) run against the sandbox: attacks contained; "
              "the start-up of a sandboxed process against an unsandboxed one, and the watchdog's poll and disk-walk "
              "cost",
              "minutes, no LLM; needs bubblewrap", False),
    Benchmark("scaleout", "bench.scaleout_bench", "Scale-out: attempts on a Ray cluster",
              "sandboxed attempts of the toy topic locally and on a local Ray cluster with 1 and 2 worker nodes, "
              "and a model of a round on a GPU cluster built from them",
              "minutes, no LLM; needs the `ray` extra", False),
]}
