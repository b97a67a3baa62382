"""`python -m bench`: the registry lists the benchmarks, runs one by name with its own arguments,
refuses an unknown name, fetches the local model only for a benchmark that asks the LLM; and
`make bench-NAME` is `python -m bench NAME`."""
from __future__ import annotations

import re

import pytest

import bench.__main__ as runner
from bench import REGISTRY
from resources.paths import REPO_ROOT


def test_the_listing_names_every_benchmark(capsys):
    assert runner.main([]) == 0
    out = capsys.readouterr().out
    for name, b in REGISTRY.items():
        assert re.search(rf"^  {re.escape(name)} +{re.escape(b.title)}", out, re.M), name


def test_an_unknown_name_is_refused(capsys):
    assert runner.main(["no_such_bench"]) == 2
    assert "no benchmark 'no_such_bench'" in capsys.readouterr().err


@pytest.mark.parametrize(("argv", "fetched"), [(["ranking", "--help"], True),
                                               (["ranking", "--similarity-only", "--help"], False),
                                               (["topics", "--help"], False)])
def test_a_benchmark_runs_as_its_module_with_its_arguments(argv, fetched, monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))   # a bench module may default it on import
    calls = []
    monkeypatch.setattr(runner, "fetch_model", lambda: calls.append(1))
    assert runner.main(argv) == 0      # argparse's --help exits 0
    out = capsys.readouterr().out
    assert out.startswith("usage: ") and ("--similarity-only" in out) == (argv[0] == "ranking")
    assert bool(calls) == fetched


def test_no_model_is_fetched_when_an_endpoint_is_configured(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
    runner.fetch_model()   # returns before importing the local model's resource


def test_make_targets_run_the_registry():
    make = (REPO_ROOT / "Makefile").read_text()
    assert re.search(r"^bench-%: setup\n\t.*\$\(PY\) -m bench \$\* \$\(ARGS\)$", make, re.M)
    assert re.search(r"^bench: setup\n\t.*\$\(PY\) -m bench run\b", make, re.M)
    assert not re.findall(r"-m bench\.\w+", make)   # no module run past the registry
