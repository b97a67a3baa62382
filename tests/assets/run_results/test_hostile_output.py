"""Experiment output crafted against the host's parsers: every parse of what a run wrote (its
stderr's error line and traceback, final_info.json, a scorer's printed JSON) is bounded in time
and ends as the attempt's recorded failure, never as a crashed or stalled step."""
from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from assets.editing.error_notes import HINTS, error_notes, explain, name_notes
from assets.editing.tracebacks import MAX_ERROR_CHARS, error_line, local_structure, own_frames
from assets.run_results.experimenting import FINAL_INFO_BYTES, RunTarget, metrics_from_output, read_final_info
from assets.run_results.repair_search import run_with_repair
from assets.shared.verdicts import MAX_METRICS, parse_metrics
from schemas.records import TraceFrame
from tests.support.execution import SCRIPT, FakeRunner, topic

# no "but found/got" after the many "expected ... Long": a pattern with two free gaps around
# "Long" tries every pair of positions from every start before it gives up
CRAFTED = "RuntimeError: " + "expected Long but " * 1100


def seconds(fn, *args) -> float:
    t0 = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t0


# --------------------------------------------------------------------------- the error line and its notes

def test_a_crafted_error_message_is_explained_within_a_second(tmp_path: Path):
    assert len(CRAFTED) > 19_000
    assert seconds(explain, CRAFTED) < 1.0
    frames = [TraceFrame(file="experiment.py", line=1, function="<module>", code="")]
    (tmp_path / "experiment.py").write_text("x = 1\n")
    assert seconds(error_notes, CRAFTED, frames, tmp_path) < 1.0
    for piece in ("cannot import name 'a' from '", "name '", "'x' object has no attribute '", "module '"):
        assert seconds(name_notes, (piece + "a" * 50) * 2_000, frames, tmp_path) < 1.0
    # the message is clipped to its head and its end: the note its end calls for still comes
    long = CRAFTED + "expected scalar type Long but found Float"
    assert explain(long) == explain("RuntimeError: expected scalar type Long but found Float") != []


def _adversarial(pattern: str, length: int = 4_000) -> list[str]:
    """Messages made of a pattern's own words repeated (prefixes that keep almost matching)."""
    words = re.findall(r"[A-Za-z_]{2,}", pattern)
    out = [" ".join(words[:k]) + " " for k in range(1, len(words) + 1)]
    out += ["'" + "' '".join(words) + "' ", '"' + " ".join(words) + " ", "(" + " ".join(words) + " ("]
    return [(piece * (length // len(piece) + 1))[:length] for piece in out]


def test_every_hint_pattern_is_quick_on_its_own_words_repeated():
    messages = [m for pattern, _ in HINTS for m in _adversarial(pattern.pattern)]
    messages += ["a" * 20_000, "1" * 20_000, " " * 20_000, "[1, " * 5_000, "'" * 20_000]
    slow = [(m[:40], t) for m in messages if (t := seconds(explain, m)) > 0.25]
    assert not slow


def test_the_error_line_is_clipped_keeping_head_and_end():
    stderr = "Traceback (most recent call last):\nRuntimeError: head " + "y" * 15_000 + " tail\n"
    line = error_line(stderr)
    assert len(line) <= MAX_ERROR_CHARS
    assert line.startswith("RuntimeError: head") and line.endswith(" tail")
    assert len(error_line("RuntimeError: " + "z" * 1_000_000)) <= MAX_ERROR_CHARS


def test_many_frames_into_a_big_source_parse_it_once(tmp_path: Path):
    """A traceback that names one big workspace file in every frame: the file is read and parsed
    once, and only the innermost frames are kept."""
    (tmp_path / "big.py").write_text("".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(3_000)))
    stderr = "Traceback (most recent call last):\n" + "".join(
        f'  File "big.py", line {1 + 3 * i}, in f{i}\n    return x\n' for i in range(600)) + "E: e\n"
    t0 = time.perf_counter()
    frames = own_frames(stderr, tmp_path)
    structure = local_structure(frames, tmp_path, mark=True)
    assert time.perf_counter() - t0 < 3.0
    assert frames and len(frames) <= 100 and frames[-1].function == "f599"
    assert "def f599(x):" in structure


# --------------------------------------------------------------------------- final_info.json

def _write(ws: Path, text: str) -> None:
    (ws / "out").mkdir(parents=True, exist_ok=True)
    (ws / "out" / "final_info.json").write_text(text)


BAD_FINAL_INFO = {
    "a 400-digit integer": ('{"accuracy": %s}' % ("1" * 400), "number too large"),
    "a 5,000-digit integer": ('{"accuracy": 0.9, "loss": %s}' % ("7" * 5_000), "number too large"),
    "a float literal past the float range": ('{"accuracy": 0.9, "loss": -1e999}', "number too large"),
    "100,000-deep nesting": ('{"accuracy": ' + "[" * 100_000 + "]" * 100_000 + "}", "nesting deeper than 64"),
    "more entries than a metrics file holds": (json.dumps({"accuracy": 0.9, **{f"m{i}": i for i in range(60_000)}}),
                                               f"more than {MAX_METRICS}"),
}


def _verdict(ws: Path) -> str | None:
    info, error = read_final_info(ws)
    return error if error is not None else parse_metrics(info, "accuracy")[1]


@pytest.mark.parametrize("kind", list(BAD_FINAL_INFO))
def test_bad_final_info_is_a_failure_with_its_reason(tmp_path: Path, kind: str):
    text, reason = BAD_FINAL_INFO[kind]
    _write(tmp_path, text)
    t0 = time.perf_counter()
    error = _verdict(tmp_path)
    assert time.perf_counter() - t0 < 2.0
    assert error is not None and reason in error and len(error) < 500, error


def test_only_finite_floats_are_metrics_and_good_files_still_read(tmp_path: Path):
    huge = 10 ** 400
    out, error = parse_metrics({"accuracy": huge, "loss": 0.5}, "accuracy")
    assert out == {"loss": 0.5} and "not a finite number" in error
    assert parse_metrics({"accuracy": 0.5, "other": huge}, "accuracy") == ({"accuracy": 0.5}, None)
    _, error = parse_metrics({"accuracy": "z" * 1_000_000}, "accuracy")
    assert len(error) < 300
    _, error = parse_metrics({"k" * 10_000: 1.0, "accuracy": 0.5}, "accuracy")
    assert "key of 10000 characters" in error
    _write(tmp_path, '{"accuracy": 0.9, "pad": "' + "x" * FINAL_INFO_BYTES + '"}')
    assert "not read" in _verdict(tmp_path)
    good = {"accuracy": {"means": 0.9}, "steps": 12, "note": "[[[ not nesting", **{f"m{i}": i for i in range(900)}}
    _write(tmp_path, json.dumps(good).replace('"steps"', '"loss": NaN, "steps"'))
    info, error = read_final_info(tmp_path)
    assert error is None
    assert parse_metrics(info, "accuracy") == ({"accuracy": 0.9, "steps": 12.0, **{f"m{i}": i for i in range(900)}},
                                               None)


@pytest.mark.parametrize("line", ['{"accuracy": %s}' % ("1" * 5_000),
                                  '{"accuracy": ' + "[" * 15_000 + "]" * 15_000 + "}"])
def test_a_scorers_crafted_json_line_is_skipped(line: str):
    assert metrics_from_output(line + "\n", "accuracy") == {}
    assert metrics_from_output(line + "\naccuracy: 0.75\n", "accuracy") == {"accuracy": 0.75}


class FinalInfoRunner(FakeRunner):
    """tests/assets/run_results/test_execution.py's fake runner, with the run's final_info.json replaced by `text`."""

    def __init__(self, text: str):
        super().__init__()
        self.text = text

    def run(self, command, workdir, timeout_s, **kw):
        res = super().run(command, workdir, timeout_s, **kw)
        _write(Path(workdir), self.text)
        return res


@pytest.mark.parametrize("kind", ["a 400-digit integer", "a 5,000-digit integer", "100,000-deep nesting"])
def test_bad_final_info_is_recorded_and_a_rerun_reuses_the_record(tmp_path: Path, monkeypatch, kind: str):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    text, reason = BAD_FINAL_INFO[kind]
    spec = topic(tmp_path / "topic")
    runner = FinalInfoRunner(text)

    def run():
        return run_with_repair(RunTarget.of_topic(spec), SCRIPT, runner=runner, workdir=tmp_path / "w",
                               idea_id="seedy/r1/x", log=lambda m: None)

    result = run()
    assert result.status == "failed" and reason in result.reason
    assert result.attempts[0].error == result.reason
    assert len(runner.calls) == 1
    again = run()  # the record is on disk: the rerun neither runs nor crashes
    assert again.status == "failed" and again.reason == result.reason and len(runner.calls) == 1
