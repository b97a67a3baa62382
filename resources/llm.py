"""`llm`: any OpenAI-compatible chat endpoint behind the `openai` client.

- JSON-schema structured output validated by the pydantic models in `schemas/`;
- bounded retries: an invalid answer is shown back to the model with the error;
- token (and, for known API models, cost) accounting per call;
- an on-disk response cache keyed by the full request, so re-materialising an unchanged
  partition, or resuming a killed run, makes no new LLM call.
- a failure carries its kind as a value (`LLMResult.error_kind`), never only as text;
- usage per stage: `with llm.track("stage") as usage:` collects the calls made inside.
With no OPENAI_BASE_URL the embedded `local_llm` server is started and used.
One job, a logical LLM call and its bookkeeping: the retry rules, the cache and the accounting read
the same request and answer, so they stay in one module (limits across processes live in llm_limits).
"""
from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Generic, TypeVar

import dagster as dg
from pydantic import BaseModel, Field, PrivateAttr, ValidationError

from resources.llm_limits import limited_http_client, limits_for
from resources.local_llm import LocalLLM, slot_count
from resources.paths import under_home
from resources.safe_io import atomic_write_text
from resources.settings import llm_endpoint, settings
from resources.timing_log import LLM as SPAN_LLM
from resources.timing_log import add_timings, log_span, server_timings, stage_scope

T = TypeVar("T")

# USD per 1M tokens (input, output) for API models people commonly point the loop at.
PRICES: dict[str, tuple[float, float]] = {
    "gpt-4o": (2.50, 10.00),
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "deepseek-chat": (0.27, 1.10),
}


def price_usd(model: str, prompt_tokens: int, completion_tokens: int) -> float:
    p = PRICES.get(model)
    if p is None:
        return 0.0
    return (prompt_tokens * p[0] + completion_tokens * p[1]) / 1e6


class LLMUnavailable(RuntimeError):
    """The endpoint cannot be reached at all (not a bad answer): the step fails and can be
    re-run; finished calls are in the cache."""


class RejectedAnswer(ValueError):
    """Raised by a `parse` function for an answer it cannot use; `kind` says why, as a value the
    caller can branch on (e.g. an edit's "no_op" or "syntax_error", see EditError)."""

    def __init__(self, kind: str, detail: str):
        super().__init__(f"{kind}: {detail}")
        self.kind = kind


# what a failed call's `error_kind` can be besides the kinds a parser raises (RejectedAnswer.kind):
INVALID_ANSWER = "invalid_answer"   # the answer did not validate (schema or parser without a kind)
REQUEST_FAILED = "request_failed"   # the endpoint answered with an error after the client's retries
ErrorKind = str  # INVALID_ANSWER | REQUEST_FAILED | a RejectedAnswer kind


def error_kind_of(e: Exception) -> ErrorKind:
    """The kind of an exception a parser raised: its own for a RejectedAnswer, else invalid_answer."""
    return e.kind if isinstance(e, RejectedAnswer) else INVALID_ANSWER


class LLMCall(BaseModel):
    """Accounting for one logical call (all its retries)."""
    stage: str
    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    cached: bool = False
    tries: int = 0
    seconds: float = 0.0
    error: str | None = None
    error_kind: ErrorKind | None = None  # why it failed, as a value (see LLMResult.error_kind)
    item: str | None = None  # the idea (idea_id) the call was made for; None: the whole round/topic


class LLMResult(BaseModel, Generic[T]):
    value: Any = None
    text: str = ""
    call: LLMCall
    error: str | None = None          # the message (for people and prompts)
    error_kind: ErrorKind | None = None  # the kind (for code): a RejectedAnswer kind, invalid_answer or request_failed
    # complete(..., top_logprobs=n): the n likeliest first answer tokens and their log-probabilities;
    # None when not asked for, {} when the endpoint returned none
    top_logprobs: dict[str, float] | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


class LLMUsage:
    """The calls an LLM resource made while a `track` block was open (on any thread)."""

    def __init__(self, stage: str):
        self.stage = stage
        self.calls: list[LLMCall] = []

    def totals(self) -> dict[str, float]:
        return usage_totals(self.calls)


def usage_totals(calls: Sequence[LLMCall]) -> dict[str, float]:
    return {
        "llm_calls": len(calls),
        "llm_cached_calls": sum(c.cached for c in calls),
        "llm_failed_calls": sum(c.error is not None for c in calls),
        "prompt_tokens": sum(c.prompt_tokens for c in calls),
        "completion_tokens": sum(c.completion_tokens for c in calls),
        "cost_usd": round(sum(c.cost_usd for c in calls), 6),
    }


def strict_schema(model: type[BaseModel]) -> dict:
    """A model's JSON schema made OpenAI-strict: refs inlined, every property required,
    no extra properties (llama.cpp's grammar converter accepts the same)."""
    schema = model.model_json_schema()
    defs = schema.pop("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                return walk(copy.deepcopy(defs[node["$ref"].split("/")[-1]]))
            # drop the annotation keywords "default"/"title", never property names
            node = {k: ({pk: walk(pv) for pk, pv in v.items()} if k == "properties" else walk(v))
                    for k, v in node.items() if k not in ("default", "title")}
            if node.get("type") == "object" and "properties" in node:
                node["required"] = list(node["properties"])
                node["additionalProperties"] = False
            return node
        if isinstance(node, list):
            return [walk(x) for x in node]
        return node

    return walk(schema)


class ResponseCache:
    """One JSON file per request hash under a folder."""

    def __init__(self, root: Path):
        self.root = root

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict | None:
        p = self._path(key)
        if p.exists():
            try:
                return json.loads(p.read_text())
            except json.JSONDecodeError:
                return None
        return None

    def put(self, key: str, value: dict) -> None:
        # atomic, under a temp name no other writer (process or thread: drafts repair side by side
        # on the ray backend) uses: a killed run never leaves half an entry
        atomic_write_text(self._path(key), json.dumps(value))

    def prune(self, max_age_s: float) -> int:
        """Delete entries older than max_age_s; returns how many."""
        cutoff = time.time() - max_age_s
        gone = 0
        for f in self.root.glob("**/*.json") if self.root.exists() else []:
            if f.stat().st_mtime < cutoff:
                f.unlink(missing_ok=True)
                gone += 1
        return gone


def _why(e: BaseException) -> str:
    """An exception's message for a failure, never empty: its type's name when it has no text."""
    return (str(e) or type(e).__name__)[:300]


def answer_text(resp: Any) -> tuple[str, str | None]:
    """(the answer's text, None) from a chat completion, or ("", what is wrong) when the response
    does not have that shape: no choices (missing, null, empty), a choice without a message, a
    message whose content is null. The client does not validate the body, so each level is
    looked up as it is."""
    choices = getattr(resp, "choices", None)
    if not isinstance(choices, list) or not choices:
        return "", "the response has no choices"
    message = getattr(choices[0], "message", None)
    if message is None:
        return "", "the response's choice has no message"
    content = getattr(message, "content", None)
    if not isinstance(content, str):
        return "", "the response's message has no content"
    return content, None


def stopped_at_limit(resp: Any) -> bool:
    """The answer ended because it reached its max_tokens (finish_reason "length"), not by itself."""
    choices = getattr(resp, "choices", None)
    return bool(isinstance(choices, list) and choices and getattr(choices[0], "finish_reason", None) == "length")


CUT_OFF_GROWTH = 2.0  # an answer cut off at its limit is asked again with this much more room ...
CUT_OFF_MAX = 4.0     # ... up to this multiple of the caller's budget


LOOP_MIN_CHARS = 1000  # shorter answers are never judged to loop
LOOP_NEW_SHARE = 0.1   # a second half that adds less than this share of new (compressed) bytes repeats the first


def repeats_itself(text: str) -> bool:
    """The answer went round in a loop (a small model repeating its last lines or the prompt until
    the limit): its second half adds almost nothing to the first once both are compressed. More
    room would only buy more of the loop."""
    data = text.encode()
    if len(data) < LOOP_MIN_CHARS:
        return False
    head, tail = data[: len(data) // 2], data[len(data) // 2:]
    added = len(zlib.compress(data, 9)) - len(zlib.compress(head, 9))
    return added < LOOP_NEW_SHARE * len(tail)


def cut_off_budget(budget: int, asked: int) -> int:
    """The answer limit of the next try after an answer stopped at `budget` (the caller asked for
    `asked`): the same request under the same limit would stop at the same place, so it grows."""
    return int(min(budget * CUT_OFF_GROWTH, asked * CUT_OFF_MAX))


def _tokens(usage: Any, name: str) -> int:
    n = getattr(usage, name, None)
    return n if isinstance(n, int) and not isinstance(n, bool) and n >= 0 else 0


def first_token_logprobs(choice) -> dict[str, float]:
    """{token: logprob} of the first answer token's alternatives in a chat completion choice
    ({} when the endpoint sent no log-probabilities); a token listed twice keeps its best value."""
    content = getattr(getattr(choice, "logprobs", None), "content", None) or []
    out: dict[str, float] = {}
    for alt in (getattr(content[0], "top_logprobs", None) or []) if content else []:
        if alt.token not in out or alt.logprob > out[alt.token]:
            out[alt.token] = float(alt.logprob)
    return out


def _not_a_completion(e: Exception) -> bool:
    """Whether the client failed on a body that is not a chat completion (not JSON, or JSON the
    client refused): an invalid answer, asked again, not a failed request."""
    return isinstance(e, json.JSONDecodeError) or type(e).__name__ == "APIResponseValidationError"


def request_key(request: dict) -> str:
    return hashlib.sha256(json.dumps(request, sort_keys=True).encode()).hexdigest()


class LLM(dg.ConfigurableResource):
    """The chat model every stage talks to (OpenAI-compatible)."""

    base_url: str = Field("", description="empty: $OPENAI_BASE_URL, else the embedded local server")
    api_key: str = Field("", description="empty: $OPENAI_API_KEY (the local server needs none)")
    model: str = Field("", description="empty: $RESEARCHLOOP_MODEL, else the local model's name")
    temperature: float = 0.2
    seed: int = 0
    max_retries: int = Field(2, description="extra tries after an invalid answer")
    timeout_s: float | None = Field(None, description="seconds one request may wait for its answer; "
                                    "None: $RESEARCHLOOP_LLM_TIMEOUT_S (settings.py)")
    transport_retries: int | None = Field(None, description="the client's own retries of a request that timed "
                                          "out or got 408/409/429/5xx; None: $RESEARCHLOOP_LLM_TRANSPORT_RETRIES")
    max_concurrency: int = Field(8, description="calls in flight against a remote endpoint")
    use_cache: bool = True
    cache_dir: str = Field("", description="empty: $DAGSTER_HOME/llm_cache")
    edit_format: str = Field("auto", description="auto | whole | search_replace")
    local_llm: LocalLLM = Field(default_factory=LocalLLM)

    _client: Any = PrivateAttr(default=None)
    _base_url: str = PrivateAttr(default="")
    _calls: list = PrivateAttr(default_factory=list)
    _tracking: list = PrivateAttr(default_factory=list)  # the open LLMUsage blocks

    # -- endpoint ---------------------------------------------------------------------
    def is_local(self) -> bool:
        return not llm_endpoint(self.base_url)  # the environment decides the endpoint (settings.py)

    def model_name(self) -> str:
        local = self.is_local()  # first, so a refused endpoint fails every call before it is made
        return self.model or settings().model or (self.local_llm.model if local else "gpt-4o-mini")

    def resolved_edit_format(self) -> str:
        if self.edit_format != "auto":
            return self.edit_format
        # Measured: the 1.5B local model rewrites short files reliably but often misses
        # SEARCH/REPLACE matches; stronger remote models do better with targeted edits.
        return "whole" if self.is_local() else "search_replace"

    def concurrency(self) -> int:
        # the local server decodes as many requests at once as it has slots; more would only queue
        return slot_count(self.local_llm.slots or None) if self.is_local() else max(1, self.max_concurrency)

    def request_timeout_s(self) -> float:
        return self.timeout_s if self.timeout_s is not None else settings().llm_timeout_s

    def request_retries(self) -> int:
        return self.transport_retries if self.transport_retries is not None else settings().llm_transport_retries

    def client(self):
        if self._client is None:
            from openai import OpenAI

            base = llm_endpoint(self.base_url) or self.local_llm.base_url()
            key = self.api_key or settings().openai_api_key.get_secret_value() or "sk-local"
            self._base_url = base
            # host-wide bounds shared with the other processes (RESEARCHLOOP_LLM_MAX_CONCURRENCY / _RPM)
            limits = limits_for(base)
            http = {"http_client": limited_http_client(limits)} if limits.active else {}
            # a silent endpoint holds a call for at most timeout x (retries + 1)
            self._client = OpenAI(base_url=base, api_key=key, timeout=self.request_timeout_s(),
                                  max_retries=self.request_retries(), **http)
        return self._client

    def _answer(self, request: dict, convo: list[dict]) -> tuple[Any, str, str | None]:
        """One request: (response, its text, None), or (response or None, "", what is wrong) when
        the body is not a chat completion with an answer (`answer_text`); a request that failed
        after the client's own retries raises the client's exception."""
        try:
            resp = self.client().chat.completions.create(**{**request, "messages": convo})
        except Exception as e:
            if _not_a_completion(e):
                return None, "", f"the response is not a chat completion: {type(e).__name__}: {_why(e)}"
            raise
        return (resp, *answer_text(resp))

    def _request_failure(self, e: Exception) -> str:
        """The message of a request that failed after the client's own retries, naming the cause."""
        if type(e).__name__ == "APITimeoutError":
            return (f"request failed: no answer within {self.request_timeout_s():g} s "
                    f"({self.request_retries() + 1} requests): {type(e).__name__}")
        return f"request failed: {type(e).__name__}: {_why(e)}"

    def cache(self) -> ResponseCache:
        return ResponseCache(Path(self.cache_dir) if self.cache_dir else under_home("llm_cache"))

    # -- calls ------------------------------------------------------------------------
    def calls(self) -> list[LLMCall]:
        return list(self._calls)

    @contextlib.contextmanager
    def track(self, stage: str) -> Iterator[LLMUsage]:
        """`with llm.track("ideas") as usage:` -- `usage.calls` are the calls made while the block
        is open (blocks may nest: a call counts in each open one). Steps that share the resource
        in one process run one after the other, so a block holds exactly its step's calls."""
        usage = LLMUsage(stage)
        self._tracking.append(usage)
        try:
            with stage_scope(stage):  # the timing log's spans name the stage (resources/timing_log.py)
                yield usage
        finally:
            self._tracking.remove(usage)

    def _record(self, call: LLMCall, served: dict | None = None) -> None:
        # list.append is atomic under the GIL: llm.map's threads may record side by side
        self._calls.append(call)
        for usage in list(self._tracking):
            usage.calls.append(call)
        # RESEARCHLOOP_TIMING_LOG (resources/timing_log.py): the call's time, for the effectiveness and
        # round benches; `served`: what the server's responses said (server_timings, summed over the
        # call's requests); retried: the answer was asked again after an invalid one
        log_span(SPAN_LLM, call.seconds, stage=call.stage, item=call.item, cached=call.cached,
                 tokens=call.prompt_tokens + call.completion_tokens, tries=call.tries,
                 retried=call.tries > 1, **(served or {}))

    def complete(
        self,
        messages: list[dict],
        *,
        stage: str,
        schema: type[BaseModel] | None = None,
        parse: Callable[[str], Any] | None = None,
        max_tokens: int = 512,
        max_retries: int | None = None,
        item: str | None = None,
        temperature: float | None = None,
        seed: int | None = None,
        top_logprobs: int = 0,
    ) -> LLMResult:
        """One logical call: structured (schema) or free text checked by `parse`.
        Never raises for a bad answer: the result carries the error after the retries.
        `item` (the idea the call serves) is accounting only, never part of the request;
        `temperature` / `seed` override the resource's for this call (they are part of the request,
        so a resampled call is cached apart from the greedy one). `top_logprobs` n > 0 asks for the
        log-probabilities of the n likeliest first answer tokens (OpenAI `logprobs`; llama.cpp's
        server answers them too), returned in `LLMResult.top_logprobs` and cached with the text."""
        model = self.model_name()
        request: dict[str, Any] = {
            "model": model, "messages": messages,
            "temperature": self.temperature if temperature is None else temperature,
            "max_tokens": max_tokens, "seed": self.seed if seed is None else seed,
        }
        if top_logprobs:
            request["logprobs"], request["top_logprobs"] = True, top_logprobs
        if schema is not None:
            request["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": schema.__name__, "schema": strict_schema(schema), "strict": True},
            }
        check = parse or (schema.model_validate_json if schema is not None else (lambda s: s))
        key = request_key(request)
        call = LLMCall(stage=stage, model=model, item=item)
        t0 = time.monotonic()
        if self.use_cache and (hit := self.cache().get(key)) is not None:
            call.cached = True
            call.seconds = time.monotonic() - t0
            try:  # a remembered failure stays a failure unless the parser now accepts it
                if hit.get("error") and not hit["text"]:  # no answer came: nothing for a parser to accept
                    raise ValueError(hit["error"])
                value = check(hit["text"])
                self._record(call)
                return LLMResult(value=value, text=hit["text"], call=call, top_logprobs=hit.get("top_logprobs"))
            except (ValidationError, ValueError) as e:  # the kind from the parser, asked again now
                call.error, call.error_kind = hit.get("error") or _why(e), error_kind_of(e)
                self._record(call)
                return LLMResult(text=hit["text"], call=call, error=call.error, error_kind=call.error_kind)
        convo = list(messages)
        text, error, kind, top = "", None, None, None
        served: dict = {}  # the server's own figures, summed over the requests (server_timings)
        retries = self.max_retries if max_retries is None else max_retries
        budget = max_tokens  # raised for the next try when an answer stops at it (cut_off_budget)
        for attempt in range(retries + 1):
            call.tries = attempt + 1
            try:
                resp, text, problem = self._answer({**request, "max_tokens": budget}, convo)
            except Exception as e:  # server errors after the client's own retries
                if type(e).__name__ == "APIConnectionError":  # the endpoint is gone: fail the step
                    raise LLMUnavailable(f"cannot reach the LLM at {self._base_url}: {_why(e)}") from e
                error, kind = self._request_failure(e), REQUEST_FAILED
                break
            if resp is not None:
                add_timings(served, server_timings(resp))
            usage = getattr(resp, "usage", None)
            call.prompt_tokens += _tokens(usage, "prompt_tokens")
            call.completion_tokens += _tokens(usage, "completion_tokens")
            if problem is not None:  # an answer of the wrong shape: invalid, asked again as it was
                error, kind = f"invalid answer (try {attempt + 1}): {problem}", INVALID_ANSWER
                continue
            if top_logprobs:
                top = first_token_logprobs(resp.choices[0])
            try:
                value = check(text)
            except (ValidationError, ValueError) as e:
                error, kind = f"invalid answer (try {attempt + 1}): {_why(e)}", error_kind_of(e)
                if stopped_at_limit(resp):  # asked again as it was, it would stop at the same place
                    if repeats_itself(text):  # ... and with more room it would only loop longer
                        error += f" (it repeated itself until the answer limit of {budget} tokens)"
                        break
                    error += f" (cut off at the answer limit of {budget} tokens)"
                    budget = cut_off_budget(budget, max_tokens)
                    convo = list(messages)
                    continue
                convo = list(messages) + [
                    {"role": "assistant", "content": text[:4000]},
                    {"role": "user", "content": f"That answer could not be used: {_why(e)}\n"
                                                "Answer again, following the required format exactly."},
                ]
                continue
            error, kind = None, None
            if self.use_cache:
                self.cache().put(key, {"text": text, "request": request,
                                       **({"top_logprobs": top} if top_logprobs else {})})
            break
        call.seconds = time.monotonic() - t0
        call.cost_usd = price_usd(model, call.prompt_tokens, call.completion_tokens)
        call.error, call.error_kind = error, kind
        if error is not None and self.use_cache and kind != REQUEST_FAILED:
            # remember answers that stayed invalid after every retry, so a re-run records
            # the same failure without asking again (transport errors are not remembered)
            self.cache().put(key, {"text": text, "request": request, "error": error})
        self._record(call, served)
        if error is not None:
            return LLMResult(text=text, call=call, error=error, error_kind=kind)
        return LLMResult(value=value, text=text, call=call, top_logprobs=top)

    def map(self, fn: Callable[[Any], T], items: Sequence[Any], *, shared_prefix: bool = False) -> list[T]:
        """Run fn over items with at most `concurrency()` LLM calls in flight, in order.
        `shared_prefix`: the items' requests begin alike (the same file and data before each item's
        own part). The local server then gets them one by one until one item has asked it
        something (items answered without it, from the response cache or by a rule, do not count),
        and the rest at once: reading a prompt is compute-bound on its cores, so requests sent
        together before any of them is cached would each read the shared part; once one has been
        answered, the slot that answered it holds the shared part (each slot caches its own last
        prompt, so another slot still reads it once), and the answers of the rest decode as one
        batch. An endpoint of its own (remote) gets them all at once."""
        if self.concurrency() <= 1 or len(items) <= 1:
            return [fn(x) for x in items]
        first: list[T] = []
        if shared_prefix and self.is_local():
            for x in items:
                asked = self._asked()
                first.append(fn(x))
                if self._asked() > asked:
                    break
        rest = items[len(first):]
        self.client()  # create the client once, before the threads share it
        with ThreadPoolExecutor(self.concurrency()) as pool:
            return first + list(pool.map(fn, rest))

    def _asked(self) -> int:
        """Calls recorded so far that the endpoint answered (not the response cache)."""
        return sum(not c.cached for c in self._calls)
