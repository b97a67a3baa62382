"""Paper sources: the Semantic Scholar and OpenAlex clients against a replaying server on
127.0.0.1 (faults injected), the shared HTTP layer (retries, Retry-After, cache, rate pool),
local dumps (JSON lines, Parquet, arXiv snapshot) with an index built once, and the
topic.yaml `literature:` choice. No network, no real embedding model."""
from __future__ import annotations

import re
import threading
import time

import polars as pl
import pytest
import yaml

from resources import scholarly
from resources.literature import Literature
from resources.scholarly import (
    HttpPolicy,
    HttpStatusError,
    JsonHttp,
    MalformedResponse,
    OpenAlex,
    RetriesExhausted,
    SemanticScholar,
    rate_limiter,
    rebuild_abstract,
    retry_after_seconds,
)
from resources.sources import LocalSource, load_papers, scan_dump
from schemas.topic import TopicSpecError, load_topic
from tests.support.embedders import CountingEmbedder
from tests.support.replay_server import FIXTURES, Fault, ReplayServer

FAST = HttpPolicy(timeout_s=2.0, max_tries=4, backoff_s=0.05, max_backoff_s=0.2)
PN = "d997beefc0922d97202789d2ac307c55c2c52fba"


@pytest.fixture(autouse=True)
def fresh_pools(monkeypatch):
    """Each test starts with no rate pools (they are process-wide by design)."""
    monkeypatch.setattr(scholarly, "_LIMITERS", {})


@pytest.fixture
def server():
    s = ReplayServer()
    yield s
    s.close()


@pytest.fixture
def s2(server, tmp_path):
    return SemanticScholar(server.base_url, api_key="s2-secret", cache_dir=tmp_path / "cache", rate=1000,
                           policy=FAST)


@pytest.fixture
def oa(server, tmp_path):
    return OpenAlex(server.base_url, mailto="me@example.org", cache_dir=tmp_path / "cache", rate=1000,
                    policy=FAST)


# ---------------------------------------------------------------- Semantic Scholar

def test_s2_search_parses_in_service_order(s2, server):
    found = s2.search("point cloud classification", 10)
    assert [p.paper_id for p in found][:2] == [PN, "8674494bd7a076286b905912d26d47f7501c4046"]
    first = found[0]
    assert first.title.startswith("PointNet:") and first.arxiv_id == "1612.00593" and first.year == 2017
    assert first.authors == ["C. Qi", "Hao Su"] and first.source == "semantic_scholar"
    assert first.query == "point cloud classification"
    assert found[2].abstract == "" and found[2].venue is None      # S2 sends null abstracts and "" venues
    assert [p.retrieval_score for p in found] == sorted((p.retrieval_score for p in found), reverse=True)
    req = server.requests[0]
    assert req.path == "/graph/v1/paper/search" and req.query["query"] == "point cloud classification"
    assert "abstract" in req.query["fields"] and req.query["limit"] == "10"
    assert req.headers["x-api-key"] == "s2-secret"


def test_s2_details_references_citations_recommendations(s2, server):
    d = s2.details("arXiv:1612.00593")
    assert d.paper_id == PN and len(d.authors) == 4
    assert server.requests[-1].path == "/graph/v1/paper/arXiv:1612.00593"
    refs = s2.references(PN)
    assert [p.title for p in refs] == ["Volumetric and Multi-View CNNs for Object Classification on 3D Data"]
    assert server.requests[-1].path == f"/graph/v1/paper/{PN}/references"   # unresolved reference skipped
    cites = s2.citations(PN, k=1)
    assert [p.title for p in cites] == ["Dynamic Graph CNN for Learning on Point Clouds"]
    assert server.requests[-1].query["limit"] == "1"
    recs = s2.recommendations(PN, k=5)
    assert [p.year for p in recs] == [2021, 2022] and recs[0].arxiv_id == "2012.09164"
    assert server.requests[-1].path == f"/recommendations/v1/papers/forpaper/{PN}"
    with pytest.raises(HttpStatusError, match="HTTP 404"):
        s2.details("missing")


def test_s2_search_pages_through_offsets(server):
    c = SemanticScholar(server.base_url, rate=1000, policy=FAST)
    c.search_page = 2
    found = c.search("points", 3)
    assert len(found) == 3
    assert [(r.query["offset"], r.query["limit"]) for r in server.requests] == [("0", "2"), ("2", "1")]


# ---------------------------------------------------------------- OpenAlex

def test_openalex_search_rebuilds_abstracts(oa, server):
    found = oa.search("point sets", 5)
    assert [p.paper_id for p in found] == ["W2560609797", "W2963121255", "W3000000001"]
    assert found[0].abstract == "Point sets are read directly by a shared network a symmetric pooling."
    assert found[0].authors == ["Charles R. Qi", "Leonidas J. Guibas"] and found[0].year == 2017
    assert found[0].venue.startswith("2017 IEEE Conference")
    assert found[1].arxiv_id == "1706.02413"                       # from the arXiv DOI
    assert found[2].title == "Proceedings front matter" and found[2].abstract == ""
    req = server.requests[0]
    assert req.path == "/works" and req.query["search"] == "point sets" and req.query["per-page"] == "5"
    assert req.query["mailto"] == "me@example.org"


def test_openalex_details_references_citations(oa, server):
    assert oa.details("https://openalex.org/W2560609797").abstract == "Point sets are read directly."
    assert server.requests[-1].path == "/works/W2560609797"
    oa.references("W2560609797", k=2)
    assert server.requests[-1].query["filter"] == "cited_by:W2560609797"
    cites = oa.citations("W2560609797", k=2)
    assert server.requests[-1].query["filter"] == "cites:W2560609797" and len(cites) == 2


def test_rebuild_abstract_orders_positions():
    assert rebuild_abstract({"b": [1], "a": [0, 2], "c": [3]}) == "a b a c"
    assert rebuild_abstract(None) == ""


# ---------------------------------------------------------------- the HTTP layer

def test_429_with_retry_after_is_honoured(s2, server):
    server.inject(Fault(status=429, retry_after="1"))
    t0 = time.monotonic()
    assert s2.details(PN).paper_id == PN
    assert time.monotonic() - t0 >= 1.0
    assert server.n == 2 and server.requests[1].at - server.requests[0].at >= 1.0


def test_429_without_retry_after_backs_off(oa, server):
    server.inject(Fault(status=429))
    assert oa.details("W2560609797").paper_id == "W2560609797"
    assert server.n == 2 and server.requests[1].at - server.requests[0].at >= 0.025  # >= half the first backoff


def test_5xx_backs_off_exponentially_then_succeeds(oa, server):
    server.inject(Fault(status=500), Fault(status=503))
    assert len(oa.search("points", 2)) == 2
    gaps = [b.at - a.at for a, b in zip(server.requests, server.requests[1:])]
    assert server.n == 3 and gaps[0] >= 0.025 and gaps[1] >= 0.05   # jittered 0.05, then 0.1


def test_persistent_5xx_gives_a_clear_error(oa, server):
    server.inject(*[Fault(status=502)] * 10)
    with pytest.raises(RetriesExhausted, match=r"openalex: GET .*/works/W1\?select=.* failed 4 times; last: HTTP 502"):
        oa.details("W1")
    assert server.n == FAST.max_tries


def test_timeout_is_retried(server, tmp_path):
    c = OpenAlex(server.base_url, rate=1000, policy=HttpPolicy(timeout_s=0.3, max_tries=3, backoff_s=0.01))
    server.inject(Fault(sleep_s=1.0))
    assert c.details("W2560609797").title.startswith("PointNet")
    assert server.n == 2


def test_malformed_json_retried_once_then_typed_error(s2, server):
    server.inject(Fault(malformed=True))
    assert s2.details(PN).paper_id == PN
    assert server.n == 2
    server.inject(Fault(malformed=True), Fault(malformed=True))
    with pytest.raises(MalformedResponse, match=r"GET .*/graph/v1/paper/other\?fields=.*malformed JSON twice") as e:
        s2.details("other")
    assert e.value.url.startswith(server.base_url + "/graph/v1/paper/other")
    assert server.n == 4


def test_retry_after_longer_than_allowed_is_an_error(server):
    c = SemanticScholar(server.base_url, rate=1000, policy=HttpPolicy(max_retry_after_s=5))
    server.inject(Fault(status=429, retry_after="3600"))
    with pytest.raises(RetriesExhausted, match="asked to wait 3600 s"):
        c.details(PN)


def test_retry_after_http_date():
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0   # in the past: no wait
    assert retry_after_seconds("2.5") == 2.5 and retry_after_seconds("soon") is None


def test_cache_makes_no_request_and_keeps_no_secret(server, tmp_path):
    cache = tmp_path / "cache"
    a = SemanticScholar(server.base_url, api_key="s2-secret", cache_dir=cache, rate=1000, policy=FAST)
    first = a.search("point cloud", 5)
    assert server.n == 1
    b = SemanticScholar(server.base_url, api_key="another-key", cache_dir=cache, rate=1000, policy=FAST)
    assert b.search("point cloud", 5) == first          # the key is not part of the cache key
    assert server.n == 1
    o1 = OpenAlex(server.base_url, mailto="a@example.org", cache_dir=cache, rate=1000, policy=FAST)
    o2 = OpenAlex(server.base_url, mailto="b@example.org", cache_dir=cache, rate=1000, policy=FAST)
    o1.details("W2560609797")
    o2.details("W2560609797")
    assert server.n == 2
    files = sorted(p.name for p in cache.iterdir())
    assert "openalex.sqlite" in files and "semantic_scholar.sqlite" in files
    stored = b"".join(p.read_bytes() for p in cache.rglob("*") if p.is_file())   # the databases and their WAL
    assert b"point cloud" in stored                     # the answers really are in these files ...
    assert b"s2-secret" not in stored and b"another-key" not in stored and b"example.org" not in stored  # ... no secret


def test_malformed_answer_is_never_cached(server, tmp_path):
    c = OpenAlex(server.base_url, cache_dir=tmp_path / "cache", rate=1000, policy=FAST)
    server.inject(Fault(malformed=True), Fault(malformed=True))
    with pytest.raises(MalformedResponse):
        c.details("W2560609797")
    assert c.details("W2560609797").paper_id == "W2560609797"     # asked again: nothing broken was stored
    assert server.n == 3
    c.details("W2560609797")                                       # the good answer was
    assert server.n == 3


def test_cache_hits_do_not_wait_for_the_rate_pool(server, tmp_path):
    c = SemanticScholar(server.base_url, cache_dir=tmp_path / "cache", rate=2.0, policy=FAST)
    c.details(PN)
    t0 = time.monotonic()
    for _ in range(5):
        c.details(PN)
    assert server.n == 1 and time.monotonic() - t0 < 1.0       # 5 requests at 2/s would take >= 2 s


def test_weekly_refresh_expires_old_answers_of_the_real_cache(home, server):
    """The schedule's job drops answers older than a week from the requests-cache databases;
    the next search asks the service again, fresh answers stay."""
    from datetime import timedelta

    from pipelines.schedules import refresh_literature
    from resources.scholarly import _cache_backend, cache_file

    lit = Literature(openalex_url=server.base_url, openalex_rate=1000)
    src = OpenAlex(server.base_url, cache_dir=lit.http_cache_root(), rate=1000, policy=FAST)
    src.details("W1")
    src.details("W2")
    assert server.n == 2
    backend = _cache_backend(cache_file(lit.http_cache_root(), "openalex"))
    aged = 0
    for key in list(backend.responses.keys()):
        resp = backend.responses[key]
        if "W1" in resp.url:
            resp.created_at -= timedelta(days=8)
            backend.responses[key] = resp
            aged += 1
    assert aged == 1
    res = refresh_literature.execute_in_process(resources={"literature": lit})
    assert res.success and res.output_for_node("expire_literature_cache") == 1
    src.details("W2")
    assert server.n == 2                   # still cached
    src.details("W1")
    assert server.n == 3                   # expired: asked again


def test_rate_pool_is_shared_by_clients_and_threads(server):
    rate, n = 20.0, 10
    a = OpenAlex(server.base_url, rate=rate, policy=FAST)
    b = OpenAlex(server.base_url, rate=rate, policy=FAST)
    assert a.http.limiter is b.http.limiter is rate_limiter("openalex", rate)
    t0 = time.monotonic()
    threads = [threading.Thread(target=lambda c=c, i=i: [c.details(f"W{i}{j}") for j in range(n // 2)])
               for i, c in enumerate((a, b))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert server.n == n
    assert time.monotonic() - t0 >= (n - 1) / rate - 0.01
    starts = sorted(r.at for r in server.requests)
    assert starts[-1] - starts[0] >= (n - 1) / rate - 0.02


def test_retry_after_holds_the_whole_pool(server):
    c = JsonHttp("pool_test", server.base_url, rate=1000, policy=FAST)
    server.inject(Fault(status=429, retry_after="0.5"))
    t = threading.Thread(target=c.get, args=("/works/W1",))
    t.start()
    time.sleep(0.15)                   # the 429 has been answered; the pool is on hold
    t0 = time.monotonic()
    c.get("/works/W2")                 # another caller of the same service waits too
    t.join()
    assert time.monotonic() - t0 >= 0.3


# ---------------------------------------------------------------- local dumps

def test_jsonl_dump_normalised():
    papers = {p.title: p for p in load_papers(FIXTURES / "dump.jsonl")}
    assert len(papers) == 3                                  # the one without an abstract is dropped
    pn = papers["PointNet: Deep Learning on Point Sets"]
    assert re.fullmatch(r"t-[0-9a-f]{12}", pn.paper_id)      # no paper_id: derived from the title
    assert pn.authors == ["Charles R. Qi", "Hao Su", "Leonidas J. Guibas"] and pn.year == 2017
    assert papers["Deep Residual Learning for Image Recognition"].abstract.startswith("Identity shortcut")
    assert load_papers(FIXTURES / "dump.jsonl")[0].paper_id == pn.paper_id   # stable


def test_parquet_dump(tmp_path):
    f = tmp_path / "papers.parquet"
    pl.DataFrame({"paper_id": ["a", "b", "a"], "title": ["Graph nets", "Point nets", "dup"],
                  "abstract": ["nodes and edges", "points in 3D", "x"], "year": [2018, 2017, 2000],
                  "authors": [["X Y"], [], ["Z"]]}).write_parquet(f)
    papers = load_papers(f)
    assert [(p.paper_id, p.title, p.year) for p in papers] == [("a", "Graph nets", 2018), ("b", "Point nets", 2017)]
    assert papers[0].authors == ["X Y"] and papers[0].source == "dump"


def test_arxiv_snapshot_streamed_with_category_filter():
    path = FIXTURES / "arxiv_snapshot.json"
    cv = load_papers(path, categories=["cs.CV"])
    assert [p.paper_id for p in cv] == ["1612.00593", "1801.07829", "2103.14030"]   # withdrawn one: no abstract
    pn = cv[0]
    assert pn.title == "PointNet: Deep Learning on Point Sets for 3D Classification and Segmentation"
    assert pn.abstract.startswith("A network reads unordered point clouds directly: a shared per-point network")
    assert pn.authors[0] == "Charles R. Qi" and pn.year == 2016 and pn.arxiv_id == "1612.00593"
    assert pn.venue == "arXiv" and cv[1].venue.startswith("ACM Transactions on Graphics")
    assert {p.paper_id for p in load_papers(path, categories=["cs"])} == {"1612.00593", "1801.07829", "1408.5882",
                                                                          "2103.14030"}
    everything = {p.paper_id: p for p in load_papers(path)}
    assert everything["math/0501001"].year == 2005 and len(everything) == 5
    assert isinstance(scan_dump(path), pl.LazyFrame)         # lazy: nothing read until collected


def test_bad_dumps_give_clear_errors(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"title": "a", "abstract": "b"}\n{"title": "c", abstract\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:2: not JSON"):
        load_papers(bad)
    nocols = tmp_path / "nocols.jsonl"
    nocols.write_text('{"name": "a", "text": "b"}\n')
    with pytest.raises(ValueError, match=r"needs 'title' and 'abstract'"):
        load_papers(nocols)
    with pytest.raises(ValueError, match="category filter needs the arXiv snapshot"):
        load_papers(FIXTURES / "dump.jsonl", categories=["cs.CV"])


def test_local_index_built_once_and_reused(tmp_path):
    dump = tmp_path / "arxiv.json"
    dump.write_text((FIXTURES / "arxiv_snapshot.json").read_text())
    emb = CountingEmbedder()
    src = LocalSource(dump, emb, tmp_path / "index", categories=["cs"])
    found = src.search("sentence classification of movie review sentiment", 2)
    assert found[0].paper_id == "1408.5882" and found[0].query.startswith("sentence")
    assert found[0].retrieval_score >= found[1].retrieval_score
    assert emb.calls == [4, 1]                               # the 4 cs papers once, then the query
    folder = src.folder()
    stamps = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}
    again = LocalSource(dump, emb, tmp_path / "index", categories=["cs"])   # a later run
    assert [p.paper_id for p in again.search("point clouds", 3)][:1] in (["1612.00593"], ["1801.07829"])
    assert emb.calls == [4, 1, 1]                            # only the query: nothing re-embedded
    assert {p.name: p.stat().st_mtime_ns for p in folder.iterdir()} == stamps
    # a changed file (size/mtime) or another filter is another index
    dump.write_text(dump.read_text() + "\n")
    assert LocalSource(dump, emb, tmp_path / "index", categories=["cs"]).folder() != folder
    assert LocalSource(FIXTURES / "arxiv_snapshot.json", emb, tmp_path / "index",
                       categories=["cs.CV"]).folder() != folder


# ---------------------------------------------------------------- the resource and topic.yaml

def test_resource_defaults_to_the_shipped_corpus(home):
    src = Literature().open(CountingEmbedder())
    assert src.name == "corpus" and src.path.name == "papers.jsonl"
    assert len(Literature().papers()) > 100


def test_topic_literature_section_is_honoured(home, server, tmp_path):
    topic_dir = home / "experiments" / "toy_classification"
    (topic_dir / "papers.jsonl").write_text((FIXTURES / "dump.jsonl").read_text())
    raw = yaml.safe_load((topic_dir / "topic.yaml").read_text())

    def with_literature(section):
        (topic_dir / "topic.yaml").write_text(yaml.safe_dump({**raw, "literature": section}))
        return load_topic(topic_dir)

    emb = CountingEmbedder()
    lit = Literature(openalex_url=server.base_url, semantic_scholar_url=server.base_url, openalex_rate=1000)
    spec = with_literature({"path": "papers.jsonl"})           # a path alone means a dump, relative to the topic
    found = lit.search("residual image recognition", 2, emb, spec)
    assert found[0].paper_id == "he2016resnet" and found[0].source == "dump"
    assert lit.open(emb, spec).path == topic_dir / "papers.jsonl"
    spec = with_literature({"source": "openalex"})
    found = lit.search("point sets", 5, emb, spec)
    assert [p.paper_id for p in found] == ["W2560609797", "W2963121255"]   # no abstract: skipped
    assert server.requests[-1].query["per-page"] == "10"                  # asked for 2 x k
    assert lit.search("point sets", 5, emb)[0].source == "corpus"         # other topics: the global choice
    spec = with_literature({"source": "dump", "path": str(FIXTURES / "arxiv_snapshot.json"), "categories": "cs.CV"})
    assert {p.paper_id for p in lit.search("point cloud", 10, emb, spec)} == {"1612.00593", "1801.07829",
                                                                             "2103.14030"}
    with pytest.raises(TopicSpecError, match="literature.*path and categories apply to source corpus or dump"):
        with_literature({"source": "semantic_scholar", "path": "papers.jsonl"})
    with pytest.raises(TopicSpecError, match="literature.source"):
        with_literature({"source": "google"})


def test_global_choice_from_environment(home, monkeypatch):
    from pipelines.definitions import build_resources

    monkeypatch.setenv("RESEARCHLOOP_LITERATURE", "dump")
    monkeypatch.setenv("RESEARCHLOOP_CORPUS", str(FIXTURES / "arxiv_snapshot.json"))
    monkeypatch.setenv("RESEARCHLOOP_CATEGORIES", "cs.CL")
    lit = build_resources(resolved=True)["literature"]
    src = lit.open(CountingEmbedder())
    assert src.name == "dump" and src.categories == ("cs.CL",)
    assert [p.paper_id for p in lit.search("sentences", 5, CountingEmbedder())] == ["1408.5882"]
    with pytest.raises(ValueError, match="unknown literature source 'arxiv'"):
        Literature(source="arxiv").open(CountingEmbedder())
    with pytest.raises(ValueError, match="needs a file"):
        Literature(source="dump").open(CountingEmbedder())


def test_papers_asset_uses_the_topic_source(home, fake_llm, server):
    """The `papers` asset reads the topic's `literature:` choice and records it in its metadata."""
    import dagster as dg

    from assets import ALL_ASSETS
    from assets.shared.partitions import multi_key
    from resources.store import Store
    from schemas.frames import from_frame
    from schemas.records import Paper
    from tests.support.resources import make_resources

    topic, topic_dir = "toy_classification", home / "experiments" / "toy_classification"
    raw = yaml.safe_load((topic_dir / "topic.yaml").read_text())
    (topic_dir / "topic.yaml").write_text(yaml.safe_dump({**raw, "literature": {"source": "openalex"}}))
    resources = {**make_resources(fake_llm.base_url),
                 "literature": Literature(openalex_url=server.base_url, openalex_rate=1000)}
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("topics", [topic])
    assert dg.materialize(ALL_ASSETS, selection=["topic_brief"], partition_key=topic, instance=instance,
                          resources=resources).success
    instance.add_dynamic_partitions("rounds", ["r1"])
    res = dg.materialize(ALL_ASSETS, selection=["papers"], partition_key=str(multi_key(topic, "r1")),
                         instance=instance, resources=resources)
    assert res.success
    meta = res.asset_materializations_for_node("papers")[0].metadata
    assert meta["source"].value == f"openalex: {server.base_url}"
    assert server.requests[0].path == "/works"
    stored = from_frame(Store().read("papers", topic, "r1"), Paper)
    assert [p.paper_id for p in stored] == ["W2560609797", "W2963121255"] and stored[0].source == "openalex"
