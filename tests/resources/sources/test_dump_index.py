"""The on-disk index of a large dump (issue 17): embeddings built in chunks that a killed build
resumes, reused when the dump grows by appending, and the faiss ANN index that the embedding
side of the hybrid search uses from ANN_MIN papers; the chunks embedded by worker processes or
Ray tasks (RESEARCHLOOP_EMBED_WORKERS), byte for byte as one worker writes them. Synthetic dumps,
the counting fake embedder (and a variant that a worker process rebuilds)."""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from resources import sources
from resources.paths import REPO_ROOT
from resources.sources import LocalSource, ann, chunk_plan, doc_text, embedding
from tests.support.embedders import CountingEmbedder


def synth_papers(n: int, seed: int = 0, topics: int = 40) -> list[dict]:
    """Papers on `topics` topics: a topic's own words mixed with words from a shared vocabulary,
    so that embeddings have the clustered structure an ANN index relies on."""
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(2000)]
    topic_words = [rng.sample(vocab, 25) for _ in range(topics)]
    out = []
    for i in range(n):
        words = rng.choices(topic_words[rng.randrange(topics)], k=12) + rng.choices(vocab, k=12)
        out.append({"paper_id": f"p{i}", "title": " ".join(words[:6]), "abstract": " ".join(words)})
    return out


def write_dump(path, papers) -> None:
    path.write_text("".join(json.dumps(p) + "\n" for p in papers))


def recall_at(scores: np.ndarray, found: np.ndarray, k: int = 10) -> float:
    """Share of the k found rows that score at least the exact k-th best (ties count as hits)."""
    kth = np.sort(scores)[-k]
    return float(np.mean(scores[found[:k]] >= kth - 1e-6)) if len(found) >= k else 0.0


class DyingEmbedder(CountingEmbedder):
    """Raises on its `die_at`-th encode call: the build is killed midway."""

    def __init__(self, die_at: int):
        super().__init__()
        self.die_at = die_at

    def encode(self, texts):
        if len(self.calls) + 1 == self.die_at:
            raise KeyboardInterrupt("killed")
        return super().encode(texts)


@pytest.fixture
def small_chunks(monkeypatch):
    monkeypatch.setattr(embedding, "EMBED_BATCH", 50)
    monkeypatch.setattr(embedding, "EMBED_CHUNK", 100)


def test_chunk_plan_follows_finished_chunks():
    assert chunk_plan({}, 250, 100) == [(0, 100), (100, 200), (200, 250)]
    assert chunk_plan({0: 100, 100: 200}, 250, 100) == [(0, 100), (100, 200), (200, 250)]
    # reused from a 130-paper index: its chunks, then fresh ones from row 130
    assert chunk_plan({0: 100, 100: 130}, 350, 100) == [(0, 100), (100, 130), (130, 230), (230, 330), (330, 350)]
    assert chunk_plan({0: 500}, 250, 100) == [(0, 100), (100, 200), (200, 250)]   # longer than the dump: ignored


def test_killed_embedding_build_resumes_with_the_missing_chunks(tmp_path, small_chunks):
    dump = tmp_path / "dump.jsonl"
    write_dump(dump, synth_papers(450))
    dying = DyingEmbedder(die_at=6)           # batches of 50, chunks of 100: dies in the 3rd chunk
    with pytest.raises(KeyboardInterrupt):
        LocalSource(dump, dying, tmp_path / "index").search("w1 w2", 3)
    folder = LocalSource(dump, dying, tmp_path / "index").folder()
    chunk_dir = next(folder.glob("emb-*"))
    assert sorted(p.name for p in chunk_dir.iterdir()) == ["chunk-000000000-000000100.npy",
                                                            "chunk-000000100-000000200.npy"]   # no partial file
    emb = CountingEmbedder()
    found = LocalSource(dump, emb, tmp_path / "index").search("w1 w2", 3)
    assert len(found) == 3
    assert emb.calls == [50, 50, 50, 50, 50, 1]   # rows 200..450 only, then the query
    whole = np.concatenate([np.load(p) for p in sorted(chunk_dir.iterdir())])
    texts = [doc_text(p["title"], p["abstract"]) for p in synth_papers(450)]
    assert np.allclose(whole, CountingEmbedder().encode(texts))   # resumed = built in one go


def test_grown_dump_reuses_the_old_embeddings(tmp_path, small_chunks):
    dump = tmp_path / "dump.jsonl"
    papers = synth_papers(430)
    write_dump(dump, papers[:230])
    emb = CountingEmbedder()
    old = LocalSource(dump, emb, tmp_path / "index")
    old.search("w3", 2)
    old_folder = old.folder()
    assert sum(emb.calls) == 230 + 1
    write_dump(dump, papers)                   # 200 papers appended
    emb.calls.clear()
    new = LocalSource(dump, emb, tmp_path / "index")
    assert new.folder() != old_folder
    meta = json.loads((new.folder() / "meta.json").read_text())
    assert meta["extends"] == old_folder.name and meta["prefix"] == 230
    new.search("w3", 2)
    assert sum(emb.calls) == 200 + 1           # only the new papers, then the query
    chunks = sorted(p.name for p in next(new.folder().glob("emb-*")).iterdir())
    assert chunks[:3] == ["chunk-000000000-000000100.npy", "chunk-000000100-000000200.npy",
                          "chunk-000000200-000000230.npy"]
    texts = [doc_text(p["title"], p["abstract"]) for p in papers]
    whole = np.concatenate([np.load(next(new.folder().glob("emb-*")) / c) for c in chunks])
    assert np.allclose(whole, CountingEmbedder().encode(texts))


def test_changed_prefix_is_rebuilt(tmp_path, small_chunks):
    dump = tmp_path / "dump.jsonl"
    papers = synth_papers(300)
    write_dump(dump, papers[:150])
    emb = CountingEmbedder()
    LocalSource(dump, emb, tmp_path / "index").search("w3", 2)
    edited = [{**papers[0], "title": "A corrected title"}] + papers[1:]   # not append-only
    write_dump(dump, edited)
    emb.calls.clear()
    src = LocalSource(dump, emb, tmp_path / "index")
    assert "extends" not in json.loads((src.folder() / "meta.json").read_text())
    src.search("w3", 2)
    assert sum(emb.calls) == 300 + 1


def test_embeddings_of_an_index_built_before_chunks_are_adopted(tmp_path, small_chunks):
    dump = tmp_path / "dump.jsonl"
    papers = synth_papers(250)
    write_dump(dump, papers)
    emb = CountingEmbedder()
    folder = LocalSource(dump, emb, tmp_path / "index").folder()
    vecs = CountingEmbedder().encode([doc_text(p["title"], p["abstract"]) for p in papers])
    np.save(folder / f"emb-{embedding._model_key(emb)}.npy", vecs)   # the old layout: one file
    LocalSource(dump, emb, tmp_path / "index").search("w3", 2)
    assert emb.calls == [1]                                     # only the query
    assert [p.name for p in next(folder.glob("emb-*/")).iterdir()] == ["chunk-000000000-000000250.npy"]


def test_ann_path_agrees_with_exact_search(tmp_path, monkeypatch):
    monkeypatch.setattr(ann, "ANN_MIN", 1000)
    dump = tmp_path / "dump.jsonl"
    write_dump(dump, synth_papers(6000))
    emb = CountingEmbedder()
    src = LocalSource(dump, emb, tmp_path / "index")
    assert len(src.search("w10 w20 w30", 5)) == 5
    folder = src.folder()
    assert len(list(folder.glob("emb-*.faiss"))) == 1          # built next to the chunks, renamed into place
    chunks = sources.embedding_chunks(folder, 6000, emb)
    index = sources.ann_index(chunks, 6000)
    assert index.ntotal == 6000
    queries = emb.encode([" ".join(p["title"].split()[:3]) for p in synth_papers(100, seed=9)])
    recalls = [recall_at(sources.exact_scores(chunks, q), sources.ann_top(index, q, 10)) for q in queries]
    assert np.mean(recalls) >= 0.9
    assert np.mean(np.array(recalls) >= 0.8) >= 0.8


def test_small_dumps_do_not_import_faiss(tmp_path):
    """faiss is imported only on the ANN path: a step searching a small dump never loads it."""
    dump = tmp_path / "dump.jsonl"
    write_dump(dump, synth_papers(50))
    code = ("import sys\n"
            "from resources.sources import LocalSource\n"
            "from tests.support.embedders import CountingEmbedder\n"
            f"LocalSource({str(dump)!r}, CountingEmbedder(), {str(tmp_path / 'i')!r}).search('w1', 2)\n"
            "assert 'faiss' not in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO_ROOT)


# ---------------------------------------------------------------- embedding in parallel

class RebuildableEmbedder(CountingEmbedder):
    """The counting fake, rebuilt in a worker process from its `rebuild_spec()`; every encode
    call, in whichever process, appends '<pid> <texts>' to the counter file."""

    def __init__(self, counter: str):
        super().__init__()
        self.counter = counter

    def rebuild_spec(self):
        return RebuildableEmbedder, {"counter": self.counter}

    def encode(self, texts):
        with open(self.counter, "a") as f:
            f.write(f"{os.getpid()} {len(texts)}\n")
        return super().encode(texts)


class DyingWorkerEmbedder(RebuildableEmbedder):
    """Raises, in whichever process, once `die_after` encode calls were counted: a parallel
    build killed midway."""

    def __init__(self, counter: str, die_after: int):
        super().__init__(counter)
        self.die_after = die_after

    def rebuild_spec(self):
        return DyingWorkerEmbedder, {"counter": self.counter, "die_after": self.die_after}

    def encode(self, texts):
        if len(_counted(Path(self.counter))) >= self.die_after:
            raise RuntimeError("killed")
        return super().encode(texts)


def _counted(counter) -> list[tuple[int, int]]:
    """(pid, texts) of every encode call recorded so far."""
    lines = counter.read_text().split() if counter.exists() else []
    return [(int(p), int(t)) for p, t in zip(lines[::2], lines[1::2])]


def _chunk_bytes(folder) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(next(folder.glob("emb-*/")).iterdir())}


def test_two_workers_write_the_same_chunks_and_resume_with_the_missing_ones(tmp_path, small_chunks, monkeypatch):
    dump = tmp_path / "dump.jsonl"
    write_dump(dump, synth_papers(450))
    counter = tmp_path / "calls"
    one = LocalSource(dump, RebuildableEmbedder(str(counter)), tmp_path / "one").folder()
    sources.embedding_chunks(one, 450, RebuildableEmbedder(str(counter)), workers=1)
    assert {pid for pid, _ in _counted(counter)} == {os.getpid()}
    counter.unlink()
    monkeypatch.setenv("RESEARCHLOOP_EMBED_WORKERS", "2")           # the setting, read by the search
    src = LocalSource(dump, RebuildableEmbedder(str(counter)), tmp_path / "two")
    assert len(src.search("w1 w2", 3)) == 3
    calls = _counted(counter)
    assert sum(t for pid, t in calls if pid != os.getpid()) == 450   # every paper in a worker process...
    assert [t for pid, t in calls if pid == os.getpid()] == [1]       # ... the query here
    two = src.folder()
    assert _chunk_bytes(two) == _chunk_bytes(one) and len(_chunk_bytes(one)) == 5   # byte for byte
    # a build killed with chunks missing (in a parallel build, any of them) embeds only those
    chunk_dir = next(two.glob("emb-*/"))
    for name in ("chunk-000000000-000000100.npy", "chunk-000000200-000000300.npy"):
        (chunk_dir / name).unlink()
    counter.unlink()
    sources.embedding_chunks(two, 450, RebuildableEmbedder(str(counter)))
    assert sorted(t for _, t in _counted(counter)) == [50, 50, 50, 50]   # rows 0-100 and 200-300 only
    assert _chunk_bytes(two) == _chunk_bytes(one)
    assert not list(chunk_dir.glob("*.tmp*"))
    # one chunk missing: embedded here, without starting workers
    (chunk_dir / "chunk-000000400-000000450.npy").unlink()
    counter.unlink()
    sources.embedding_chunks(two, 450, RebuildableEmbedder(str(counter)))
    assert _counted(counter) == [(os.getpid(), 50)]
    assert _chunk_bytes(two) == _chunk_bytes(one)


def test_a_killed_parallel_build_resumes_with_the_missing_chunks(tmp_path, small_chunks):
    dump = tmp_path / "dump.jsonl"
    write_dump(dump, synth_papers(450))
    counter = tmp_path / "calls"
    one = LocalSource(dump, CountingEmbedder(), tmp_path / "one").folder()
    sources.embedding_chunks(one, 450, CountingEmbedder(), workers=1)
    folder = LocalSource(dump, CountingEmbedder(), tmp_path / "two").folder()
    with pytest.raises(RuntimeError, match="killed"):            # dies after 4 batches: 2 chunks at most
        sources.embedding_chunks(folder, 450, DyingWorkerEmbedder(str(counter), die_after=4), workers=2)
    chunk_dir = next(folder.glob("emb-*/"))
    kept = {p.name for p in chunk_dir.iterdir()}
    assert len(kept) <= 2 and not any(".tmp" in k for k in kept)  # whole chunks only
    kept_rows = sum(stop - start for start, stop in embedding._chunk_ranges(chunk_dir).items())
    counter.unlink()
    sources.embedding_chunks(folder, 450, RebuildableEmbedder(str(counter)), workers=2)
    assert sum(t for _, t in _counted(counter)) == 450 - kept_rows        # only what was missing
    assert _chunk_bytes(folder) == _chunk_bytes(one)


def test_an_embedder_that_cannot_be_rebuilt_embeds_in_this_process(tmp_path, small_chunks, caplog):
    dump = tmp_path / "dump.jsonl"
    write_dump(dump, synth_papers(250))
    emb = CountingEmbedder()                                          # no rebuild_spec
    folder = LocalSource(dump, emb, tmp_path / "index").folder()
    with caplog.at_level("INFO", logger="researchloop.literature"):
        sources.embedding_chunks(folder, 250, emb, workers=2)
    assert emb.calls == [50, 50, 50, 50, 50]
    assert "cannot be rebuilt in another process" in caplog.text


@pytest.mark.extended
@pytest.mark.slow
def test_ray_backend_embeds_the_chunks_as_ray_tasks(tmp_path, small_chunks, monkeypatch, caplog):
    """A local Ray instance (2 CPUs) stands for the cluster: the chunks come back from Ray workers,
    written here byte for byte as one worker writes them."""
    ray = pytest.importorskip("ray")
    dump = tmp_path / "dump.jsonl"
    write_dump(dump, synth_papers(450))
    counter = tmp_path / "calls"
    one = LocalSource(dump, CountingEmbedder(), tmp_path / "one").folder()
    sources.embedding_chunks(one, 450, CountingEmbedder(), workers=1)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("RESEARCHLOOP_BACKEND", "ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, namespace="researchloop-test")
    try:
        two = LocalSource(dump, RebuildableEmbedder(str(counter)), tmp_path / "two").folder()
        with caplog.at_level("INFO", logger="researchloop.literature"):
            sources.embedding_chunks(two, 450, RebuildableEmbedder(str(counter)), workers=2)
    finally:
        ray.shutdown()
    assert "as Ray tasks, 2 at once" in caplog.text and "local processes" not in caplog.text
    calls = _counted(counter)
    assert sum(t for _, t in calls) == 450 and os.getpid() not in {pid for pid, _ in calls}
    assert _chunk_bytes(two) == _chunk_bytes(one)
