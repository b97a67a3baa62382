"""Online paper sources: the Semantic Scholar Graph API and OpenAlex, over one small JSON layer
built from libraries:

- `requests` + `requests-cache`: an on-disk response cache (SQLite, one file per service under
  the cache folder) keyed by method + URL + parameters; the API key header and the contact
  address (`mailto`) are left out of the key and redacted from what is stored, so a re-run with
  another key makes no request and the cache holds no secret. Only 200 answers whose body is
  JSON are stored; `expire_cache` drops answers older than an age (the weekly schedule).
- `tenacity`: retries on 429, 5xx, timeouts and connection errors with jittered exponential
  backoff, honouring Retry-After (seconds or an HTTP date), up to `max_tries`, then
  `RetriesExhausted`; a malformed JSON body is retried once, then `MalformedResponse`.
- a rate limiter per service per process (`RateLimiter`, below), shared by every client and
  thread and applied only to requests that reach the network (cache hits are free); a 429's
  Retry-After holds the whole pool. No library we found shares one pool across clients and
  pauses it for a server's Retry-After, so these ~25 lines stay ours.
"""
from __future__ import annotations

import email.utils
import json
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import requests
import tenacity
from requests import PreparedRequest, Response
from requests.adapters import HTTPAdapter

from resources.sources import OnlineSource
from schemas.records import Paper

S2_URL = "https://api.semanticscholar.org"
OPENALEX_URL = "https://api.openalex.org"
USER_AGENT = "researchloop/0.1 (literature search)"
# never part of a cache key, never stored (requests-cache redacts them)
SECRET_PARAMS = ("x-api-key", "mailto", "Authorization", "api_key", "apikey", "access_token")


class SourceError(RuntimeError):
    """An online source could not answer."""


class HttpStatusError(SourceError):
    """A status that retrying will not fix (400, 401, 403, 404 ...)."""

    def __init__(self, url: str, status: int, body: str):
        super().__init__(f"GET {url}: HTTP {status}: {body[:200]}")
        self.url, self.status = url, status


class RetriesExhausted(SourceError):
    """Still failing (429, 5xx, timeouts) after the allowed tries."""


class MalformedResponse(SourceError):
    """The body was not JSON, twice."""

    def __init__(self, url: str, detail: str):
        super().__init__(f"GET {url}: malformed JSON twice ({detail})")
        self.url = url


class _Transient(Exception):
    """One failed try worth another: `why` for the final message, `wait` from Retry-After
    (None: exponential backoff), `malformed` when the body was not JSON."""

    def __init__(self, why: str, wait: float | None = None, malformed: bool = False):
        super().__init__(why)
        self.why, self.wait, self.malformed = why, wait, malformed


# ---------------------------------------------------------------- rate limiting

class RateLimiter:
    """At most `rate` requests per second across threads: each caller reserves the next free
    slot under a lock, then sleeps until it."""

    def __init__(self, rate: float):
        self.interval = 1.0 / rate
        self._next = 0.0
        self._lock = threading.Lock()

    def acquire(self) -> None:
        with self._lock:
            now = time.monotonic()
            slot = max(now, self._next)
            self._next = slot + self.interval
        if slot > now:
            time.sleep(slot - now)

    def hold(self, seconds: float) -> None:
        """Nobody in the pool sends before `seconds` from now (a server's Retry-After)."""
        with self._lock:
            self._next = max(self._next, time.monotonic() + seconds)


_LIMITERS: dict[str, RateLimiter] = {}
_LIMITERS_LOCK = threading.Lock()


def rate_limiter(service: str, rate: float) -> RateLimiter:
    """The process-wide limiter of a service (created on first use; a later client with another
    rate re-tunes the shared one rather than adding a second pool)."""
    with _LIMITERS_LOCK:
        lim = _LIMITERS.get(service)
        if lim is None:
            lim = _LIMITERS[service] = RateLimiter(rate)
        else:
            lim.interval = 1.0 / rate
        return lim


class _LimitedAdapter(HTTPAdapter):
    """The transport: every request that goes out on the network first takes a slot of the
    service's pool (requests-cache answers hits before reaching here)."""

    def __init__(self, limiter: RateLimiter):
        super().__init__()
        self.limiter = limiter

    def send(self, request: PreparedRequest, *args: Any, **kwargs: Any) -> Response:
        self.limiter.acquire()
        return super().send(request, *args, **kwargs)


# ---------------------------------------------------------------- the response cache

def _is_json(response: requests.Response) -> bool:
    try:
        json.loads(response.content)
    except ValueError:
        return False
    return True


def cache_file(cache_dir: Path, service: str) -> Path:
    return Path(cache_dir) / f"{service}.sqlite"


def _cache_backend(path: Path):
    from requests_cache import SQLiteCache

    path.parent.mkdir(parents=True, exist_ok=True)
    # WAL: steps in other processes read while one writes; wait up to 30 s for a write lock
    return SQLiteCache(path, wal=True, busy_timeout=30_000)


def _session(service: str, limiter: RateLimiter, cache_dir: Path | None) -> requests.Session:
    if cache_dir is None:
        session = requests.Session()
    else:
        from requests_cache import CachedSession

        session = CachedSession(backend=_cache_backend(cache_file(cache_dir, service)), expire_after=-1,
                                allowable_codes=(200,), allowable_methods=("GET",), match_headers=False,
                                ignored_parameters=SECRET_PARAMS, filter_fn=_is_json, cache_control=False)
    adapter = _LimitedAdapter(limiter)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session


def expire_cache(cache_dir: Path, max_age_s: float) -> int:
    """Drop cached answers older than `max_age_s` from every service's cache under `cache_dir`;
    returns how many."""
    gone = 0
    for path in sorted(Path(cache_dir).glob("*.sqlite")) if Path(cache_dir).is_dir() else []:
        cache = _cache_backend(path)
        old = [r.cache_key for r in cache.filter(valid=False, older_than=timedelta(seconds=max_age_s))]
        if old:
            cache.delete(*old)
        gone += len(old)
    return gone


# ---------------------------------------------------------------- JSON over HTTP

@dataclass(frozen=True)
class HttpPolicy:
    timeout_s: float = 30.0
    max_tries: int = 5
    backoff_s: float = 1.0          # first retry waits between this and twice this, doubling each time
    max_backoff_s: float = 60.0
    max_retry_after_s: float = 300.0  # a server asking for a longer pause is an error, not a hang


def retry_after_seconds(value: str | None) -> float | None:
    """Retry-After as seconds (a number or an HTTP date); None when absent or unreadable."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


class _WaitRetryAfter(tenacity.wait.wait_base):
    """The server's Retry-After when it gave one, else jittered exponential backoff."""

    def __init__(self, policy: HttpPolicy):
        self.backoff = tenacity.wait_exponential_jitter(multiplier=policy.backoff_s, max=policy.max_backoff_s,
                                                        jitter=policy.backoff_s)

    def __call__(self, retry_state: tenacity.RetryCallState) -> float:
        err = retry_state.outcome.exception() if retry_state.outcome else None
        if isinstance(err, _Transient) and err.wait is not None:
            return err.wait
        return self.backoff(retry_state)


_NETWORK_ERRORS = (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError,
                   requests.exceptions.ContentDecodingError)


class JsonHttp:
    """GET JSON from one service: rate-limited, retried, cached."""

    def __init__(self, service: str, base_url: str, rate: float, *, headers: dict[str, str] | None = None,
                 identity_params: dict[str, str] | None = None, cache_dir: Path | None = None,
                 policy: HttpPolicy = HttpPolicy()):
        self.service = service
        self.base_url = base_url.rstrip("/")
        self.limiter = rate_limiter(service, rate)
        self.identity_params = {k: v for k, v in (identity_params or {}).items() if v}
        self.policy = policy
        self.session = _session(service, self.limiter, cache_dir)
        self.session.headers.update({"User-Agent": USER_AGENT, "Accept": "application/json", **(headers or {})})

    def _retry_after(self, headers, status: int, shown: str) -> float | None:
        """This request's wait from Retry-After (None: back off). A 429's pause holds the
        whole pool, so the other threads wait too."""
        wait = retry_after_seconds(headers.get("Retry-After") if headers else None)
        if wait is None:
            return None
        if wait > self.policy.max_retry_after_s:
            raise RetriesExhausted(f"{self.service}: GET {shown}: HTTP {status}, asked to wait {wait:.0f} s "
                                   f"(more than max_retry_after_s={self.policy.max_retry_after_s:.0f})")
        if status == 429:
            self.limiter.hold(wait)
            return 0.0
        return wait

    def _try(self, url: str, params: dict, shown: str, malformed_before: bool) -> Any:
        """One request; _Transient when another try may help."""
        try:
            r = self.session.get(url, params={**params, **self.identity_params}, timeout=self.policy.timeout_s)
        except _NETWORK_ERRORS as e:   # timeouts, refused, reset, cut short
            raise _Transient(f"{type(e).__name__}: {e}") from e
        if r.status_code == 429 or r.status_code >= 500:
            raise _Transient(f"HTTP {r.status_code}", self._retry_after(r.headers, r.status_code, shown))
        if r.status_code >= 400:
            raise HttpStatusError(shown, r.status_code, r.content.decode("utf-8", "replace"))
        try:
            return json.loads(r.content)
        except ValueError as e:   # JSONDecodeError, UnicodeDecodeError
            if malformed_before:
                raise MalformedResponse(shown, str(e)) from e
            raise _Transient(f"malformed JSON: {e}", malformed=True) from e   # once: may be a glitch

    def get(self, path: str, params: dict[str, Any] | None = None) -> Any:
        params = {k: v for k, v in (params or {}).items() if v is not None}
        url = self.base_url + path
        shown = url + ("?" + urllib.parse.urlencode(params) if params else "")
        malformed = False
        retrying = tenacity.Retrying(stop=tenacity.stop_after_attempt(self.policy.max_tries),
                                     wait=_WaitRetryAfter(self.policy),
                                     retry=tenacity.retry_if_exception_type(_Transient), reraise=False)
        try:
            for attempt in retrying:
                with attempt:
                    try:
                        return self._try(url, params, shown, malformed)
                    except _Transient as t:
                        malformed = malformed or t.malformed
                        raise
        except tenacity.RetryError as e:
            last = e.last_attempt.exception()
            if isinstance(last, _Transient) and last.malformed:
                raise MalformedResponse(shown, last.why) from last
            raise RetriesExhausted(f"{self.service}: GET {shown} failed {self.policy.max_tries} times; "
                                   f"last: {last}") from last
        raise AssertionError("unreachable")


def _paged(fetch: Callable[[int, int], list], k: int, page_max: int) -> list:
    """Collect up to k items from an offset/limit endpoint; fetch(offset, limit) -> items."""
    out: list = []
    while len(out) < k:
        limit = min(page_max, k - len(out))
        items = fetch(len(out), limit)
        out.extend(items[:limit])
        if len(items) < limit:
            break
    return out


def _ranked(papers: list[Paper], query: str) -> list[Paper]:
    """The service's own order, recorded as a score that falls with rank."""
    return [p.model_copy(update={"query": query, "retrieval_score": round(1.0 / (r + 1), 6)})
            for r, p in enumerate(papers)]


# ---------------------------------------------------------------- Semantic Scholar

S2_FIELDS = "paperId,title,abstract,year,venue,authors,externalIds"


def s2_paper(d: dict) -> Paper:
    ext = d.get("externalIds") or {}
    return Paper(paper_id=d["paperId"], title=(d.get("title") or "").strip(),
                 abstract=(d.get("abstract") or "").strip(), year=d.get("year"), venue=d.get("venue") or None,
                 authors=[a["name"] for a in d.get("authors") or [] if a.get("name")],
                 arxiv_id=ext.get("ArXiv"), source="semantic_scholar")


class SemanticScholar(OnlineSource):
    """Semantic Scholar Graph API: relevance search, details, references, citations and
    recommendations. Without an API key S2 shares a small public pool: keep ~1 request/s."""

    name = "semantic_scholar"
    search_page = 100   # the API's page limit for relevance search

    def __init__(self, base_url: str = S2_URL, api_key: str = "", cache_dir: Path | None = None,
                 rate: float = 1.0, policy: HttpPolicy = HttpPolicy()):
        self.http = JsonHttp(self.name, base_url, rate, headers={"x-api-key": api_key} if api_key else None,
                             cache_dir=cache_dir, policy=policy)

    def describe(self) -> str:
        return f"{self.name}: {self.http.base_url}"

    @staticmethod
    def _quote(paper_id: str) -> str:
        return urllib.parse.quote(paper_id, safe=":")

    def _papers(self, items) -> list[Paper]:
        return [s2_paper(d) for d in items if d and d.get("paperId")]

    def search(self, query: str, k: int) -> list[Paper]:
        """Relevance search (the API serves at most 1,000 results per query, 100 per page)."""
        def page(offset: int, limit: int) -> list:
            return self.http.get("/graph/v1/paper/search", {"query": query, "fields": S2_FIELDS,
                                                            "offset": offset, "limit": limit}).get("data") or []
        return _ranked(self._papers(_paged(page, min(k, 1000), self.search_page)), query)

    def details(self, paper_id: str) -> Paper:
        """paper_id: an S2 id, or a prefixed one such as 'arXiv:1612.00593' or 'DOI:10...'."""
        return s2_paper(self.http.get(f"/graph/v1/paper/{self._quote(paper_id)}", {"fields": S2_FIELDS}))

    def _neighbours(self, paper_id: str, edge: str, key: str, k: int) -> list[Paper]:
        def page(offset: int, limit: int) -> list:
            return self.http.get(f"/graph/v1/paper/{self._quote(paper_id)}/{edge}",
                                 {"fields": S2_FIELDS, "offset": offset, "limit": limit}).get("data") or []
        return self._papers(e.get(key) for e in _paged(page, k, 1000))

    def references(self, paper_id: str, k: int = 100) -> list[Paper]:
        return self._neighbours(paper_id, "references", "citedPaper", k)

    def citations(self, paper_id: str, k: int = 100) -> list[Paper]:
        return self._neighbours(paper_id, "citations", "citingPaper", k)

    def recommendations(self, paper_id: str, k: int = 20) -> list[Paper]:
        body = self.http.get(f"/recommendations/v1/papers/forpaper/{self._quote(paper_id)}",
                             {"fields": S2_FIELDS, "limit": min(k, 500)})
        return self._papers(body.get("recommendedPapers") or [])[:k]


# ---------------------------------------------------------------- OpenAlex

OPENALEX_SELECT = "id,doi,title,display_name,publication_year,primary_location,authorships,abstract_inverted_index"


def rebuild_abstract(inverted: dict[str, list[int]] | None) -> str:
    """OpenAlex ships abstracts as {word: [positions]}: put the words back in order."""
    if not inverted:
        return ""
    at = {pos: word for word, positions in inverted.items() for pos in positions}
    return " ".join(at[i] for i in sorted(at))


def openalex_id(work_id: str) -> str:
    """'https://openalex.org/W123' -> 'W123'; other ids ('W123', 'doi:10...') unchanged."""
    return work_id.rsplit("/", 1)[-1] if work_id.startswith("http") else work_id


def openalex_work(d: dict) -> Paper:
    doi = (d.get("doi") or "").lower()
    arxiv = doi.split("10.48550/arxiv.", 1)[1] if "10.48550/arxiv." in doi else None
    source = ((d.get("primary_location") or {}).get("source") or {})
    return Paper(paper_id=openalex_id(d["id"]), title=(d.get("title") or d.get("display_name") or "").strip(),
                 abstract=rebuild_abstract(d.get("abstract_inverted_index")), year=d.get("publication_year"),
                 venue=source.get("display_name"),
                 authors=[a["author"]["display_name"] for a in d.get("authorships") or []
                          if (a.get("author") or {}).get("display_name")],
                 arxiv_id=arxiv, source="openalex")


class OpenAlex(OnlineSource):
    """OpenAlex works: search, details, references (works it cites) and citations (works citing
    it). A contact address (mailto) puts requests in OpenAlex's faster 'polite pool'."""

    name = "openalex"

    def __init__(self, base_url: str = OPENALEX_URL, mailto: str = "", cache_dir: Path | None = None,
                 rate: float = 10.0, policy: HttpPolicy = HttpPolicy()):
        self.http = JsonHttp(self.name, base_url, rate, identity_params={"mailto": mailto},
                             cache_dir=cache_dir, policy=policy)

    def describe(self) -> str:
        return f"{self.name}: {self.http.base_url}"

    def _works(self, params: dict, k: int) -> list[Paper]:
        def page(offset: int, limit: int) -> list:
            # OpenAlex pages by number: with a fixed per-page size, offset is a multiple of it
            return self.http.get("/works", {**params, "select": OPENALEX_SELECT, "per-page": per_page,
                                            "page": offset // per_page + 1}).get("results") or []
        per_page = min(max(k, 1), 200)
        return [openalex_work(d) for d in _paged(page, k, per_page) if d.get("id")]

    def search(self, query: str, k: int) -> list[Paper]:
        return _ranked(self._works({"search": query}, k), query)

    def details(self, paper_id: str) -> Paper:
        return openalex_work(self.http.get(f"/works/{urllib.parse.quote(openalex_id(paper_id), safe=':/')}",
                                           {"select": OPENALEX_SELECT}))

    def references(self, paper_id: str, k: int = 100) -> list[Paper]:
        return self._works({"filter": f"cited_by:{openalex_id(paper_id)}"}, k)

    def citations(self, paper_id: str, k: int = 100) -> list[Paper]:
        return self._works({"filter": f"cites:{openalex_id(paper_id)}"}, k)
