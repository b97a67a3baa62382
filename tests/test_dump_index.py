"""The on-disk index of a large dump (issue 17): embeddings built in chunks that a killed build
resumes, reused when the dump grows by appending, and the faiss ANN index that the embedding
side of the hybrid search uses from ANN_MIN papers. Synthetic dumps, the counting fake embedder."""
from __future__ import annotations

import json
import random
import subprocess
import sys

import numpy as np
import pytest

from resources import sources
from resources.paths import REPO_ROOT
from resources.sources import LocalSource, chunk_plan, doc_text
from tests.test_literature_sources import CountingEmbedder


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
    monkeypatch.setattr(sources, "EMBED_BATCH", 50)
    monkeypatch.setattr(sources, "EMBED_CHUNK", 100)


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
    np.save(folder / f"emb-{sources._model_key(emb)}.npy", vecs)   # the old layout: one file
    LocalSource(dump, emb, tmp_path / "index").search("w3", 2)
    assert emb.calls == [1]                                     # only the query
    assert [p.name for p in next(folder.glob("emb-*/")).iterdir()] == ["chunk-000000000-000000250.npy"]


def test_ann_path_agrees_with_exact_search(tmp_path, monkeypatch):
    monkeypatch.setattr(sources, "ANN_MIN", 1000)
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
            "from tests.test_literature_sources import CountingEmbedder\n"
            f"LocalSource({str(dump)!r}, CountingEmbedder(), {str(tmp_path / 'i')!r}).search('w1', 2)\n"
            "assert 'faiss' not in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO_ROOT)
