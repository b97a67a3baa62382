"""The manual: README.md and docs/ (MkDocs). The generated reference pages match the code, the
site builds with --strict (broken links and anchors fail it), the README stays a short front page
whose links resolve, its asset graph names real assets and real edges, and the make targets and the
topic.yaml example the pages show exist and validate."""
from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support import paths

ROOT = paths.REPO
README = ROOT / "README.md"
DOCS = ROOT / "docs"
FENCE = re.compile(r"^```[^\n]*\n.*?^```", re.M | re.S)


def gen_reference():
    spec = importlib.util.spec_from_file_location("gen_reference", DOCS / "gen_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("page", ["topic-reference.md", "environment.md"])
def test_generated_pages_are_current(page):
    rendered = gen_reference().PAGES[page]()
    assert (DOCS / page).read_text() == rendered, f"docs/{page} is out of date: run `make docs-reference`"


def test_every_topic_field_is_described_in_the_reference():
    from pydantic import BaseModel

    from schemas.topic import TopicSpec

    def fields(model, prefix=""):
        for name, f in model.model_fields.items():
            if f.exclude:
                continue
            yield f"{prefix}{name}", f
            sub = f.annotation if isinstance(f.annotation, type) and issubclass(f.annotation, BaseModel) else None
            sub = sub or next((a for a in getattr(f.annotation, "__args__", ()) if isinstance(a, type)
                               and issubclass(a, BaseModel)), None)
            if sub:
                yield from fields(sub, f"{prefix}{name}.")

    page = (DOCS / "topic-reference.md").read_text()
    for key, f in fields(TopicSpec):
        assert f.description, f"topic.yaml key {key} has no description in schemas/topic.py"
        assert f"| `{key}` |" in page, key


def test_mkdocs_builds_strict(tmp_path):
    mkdocs = Path(sys.executable).parent / "mkdocs"
    r = subprocess.run([str(mkdocs), "build", "--strict", "-f", str(ROOT / "mkdocs.yml"), "-d", str(tmp_path / "site")],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (tmp_path / "site" / "index.html").is_file()
    assert (tmp_path / "site" / "topic-reference" / "index.html").is_file()


def test_readme_is_a_short_front_page():
    text = README.read_text()
    assert len(text.splitlines()) <= 200
    prose = FENCE.sub("", text)  # example output may hold run ids
    assert not re.search(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b", prose), "a commit hash"
    assert not re.search(r"\b20\d\d-\d\d-\d\d\b", text), "a date"
    for section in ("## The asset graph", "## Requirements", "## The two commands", "## What `make run` prints",
                    "## Where results land", "## Headline results", "## Documentation"):
        assert section in text


def github_anchors(markdown: str) -> set[str]:
    """The heading ids GitHub gives a Markdown file (lower case, punctuation dropped, spaces to '-',
    a repeated id numbered)."""
    seen: dict[str, int] = {}
    out = set()
    for line in FENCE.sub("", markdown).splitlines():
        m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        slug = re.sub(r"[^\w\- ]", "", m[1].lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def test_readme_links_resolve():
    links = re.findall(r"\]\(([^)\s]+)\)", FENCE.sub("", README.read_text()))
    local = [link for link in links if not re.match(r"[a-z]+:", link)]
    assert local, "the README links its docs and results"
    for link in local:
        path, _, anchor = link.partition("#")
        target = (ROOT / path) if path else README
        assert target.exists(), f"README links {link}: no {path}"
        if anchor and target.suffix == ".md":
            assert anchor in github_anchors(target.read_text()), f"README links {link}: no such heading"


def mermaid_edges(markdown: str) -> tuple[set[tuple[str, str]], set[tuple[str, str]], set[str]]:
    """(solid edges, dashed edges, nodes) of the first mermaid block."""
    block = re.search(r"^```mermaid\n(.*?)^```", markdown, re.M | re.S)[1]
    solid, dashed, nodes = set(), set(), set()
    for line in block.splitlines():
        line = re.sub(r'"[^"]*"', "", line)
        if "-." in line:
            a, b = [x.strip() for x in re.split(r"-\.\s*\.?->", line)]
            dashed.add((a, b))
            nodes |= {a, b}
        elif "-->" in line:
            chain = [x.strip() for x in line.split("-->")]
            solid |= set(zip(chain, chain[1:]))
            nodes |= set(chain)
    return solid, dashed, nodes


def real_edges():
    from assets import ALL_ASSETS, ROUND_ASSETS

    edges = {(d.to_user_string(), k.to_user_string()) for a in ALL_ASSETS for k in a.keys for d in a.asset_deps[k]}
    names = [a.key.to_user_string() for a in ALL_ASSETS]
    rounds = [a.key.to_user_string() for a in ROUND_ASSETS]
    # what the pages say in words beside the diagram: every round asset reads topic_brief, and every
    # stage from `ideas` on reads round_reference
    told = {("topic_brief", r) for r in rounds} | {("round_reference", r) for r in rounds[rounds.index("ideas"):]}
    return edges, set(names), told


@pytest.mark.parametrize("page", ["README.md", "docs/index.md"])
def test_the_asset_graph_shows_real_assets_and_edges(page):
    edges, names, told = real_edges()
    assert told <= edges, "the text beside the diagram says more than the code does"
    solid, dashed, nodes = mermaid_edges((ROOT / page).read_text())
    assert nodes == names, f"{page}: diagram nodes differ from the assets: {sorted(nodes ^ names)}"
    assert solid <= edges, f"{page}: edges that are no dependency: {sorted(solid - edges)}"
    assert dashed == {("best_code", "round_reference")}  # the next round, through the record store
    if page == "docs/index.md":  # the full graph: what the diagram leaves out, the text says
        assert edges <= solid | told, f"{page}: edges missing: {sorted(edges - solid - told)}"


def test_make_targets_the_pages_name_exist():
    makefile = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([A-Za-z][\w.-]*)\s*:(?!=)", makefile, re.M))
    patterns = [t[:-1] for t in re.findall(r"^([\w-]+%)\s*:", makefile, re.M)]
    pages = [README, *sorted(DOCS.glob("*.md"))]
    named = {m for p in pages for m in re.findall(r"`make ([a-z][\w-]*)", p.read_text())}
    assert {"run", "test", "docs"} <= named
    missing = {t for t in named if t not in targets and not any(t.startswith(p) for p in patterns)}
    assert not missing, f"make targets named in the manual but not in the Makefile: {sorted(missing)}"


def test_run_installs_no_test_only_package():
    makefile = (ROOT / "Makefile").read_text()

    def recipe(target):
        m = re.search(rf"^{re.escape(target)}:[^\n]*\n((?:\t[^\n]*\n)+)", makefile, re.M)
        return m[1] if m else ""

    run_deps = recipe("system-deps")
    for pkg in ("postgresql", "chromium", "chromium-driver"):
        assert pkg not in run_deps
        assert pkg in recipe("test-deps")
    assert "bubblewrap" in run_deps and "dataset-fashion-mnist" in run_deps
    assert re.search(r"^setup:.*\bsystem-deps\b", makefile, re.M)
    assert not re.search(r"^(setup|run):.*\btest-deps\b", makefile, re.M)
    assert re.search(r"^test:.*\btest-deps\b", makefile, re.M)


def test_the_topic_example_is_a_valid_topic():
    from schemas.topic import TopicSpec

    block = re.search(r"^```yaml\n(.*?)^```", (DOCS / "topics.md").read_text(), re.M | re.S)[1]
    spec = TopicSpec.model_validate(yaml.safe_load(block))
    assert spec.budget.seeds == 3


def test_the_stage_names_match_the_asset_definitions():
    """assets/shared/stages.py names the stages for code that may not import assets/__init__."""
    from assets import ROUND_ASSETS, TOPIC_ASSETS
    from assets.shared.stages import ROUND_STAGES, TOPIC_STAGES

    assert tuple(a.key.to_user_string() for a in ROUND_ASSETS) == ROUND_STAGES
    assert tuple(a.key.to_user_string() for a in TOPIC_ASSETS) == TOPIC_STAGES
