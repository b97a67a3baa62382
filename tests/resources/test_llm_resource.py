"""resources/llm.py against a tiny local OpenAI-compatible server (no model, no network)."""
from __future__ import annotations

import json
import time

import pytest
from pydantic import BaseModel

from resources.llm import LLM, PRICES, LLMCall, price_usd, strict_schema, usage_totals
from schemas.llm_outputs import IdeaList, NoveltyJudgement
from tests.support.llm_servers import QueueServer

GOOD = json.dumps({"decision": "novel", "closest_paper": 2, "reason": "nobody did it"})


@pytest.fixture
def server():
    s = QueueServer()
    yield s
    s.close()


@pytest.fixture
def make_llm(server, tmp_path):
    def make(**kw) -> LLM:
        args = dict(base_url=server.base_url, api_key="x", model="m", cache_dir=str(tmp_path / "c"))
        return LLM(**{**args, **kw})
    return make


MSGS = [{"role": "system", "content": "You judge novelty."}, {"role": "user", "content": "Is idea X novel?"}]


def test_invalid_then_valid_succeeds_on_retry(server, make_llm):
    server.answers.extend(["this is not json", GOOD])
    llm = make_llm()
    r = llm.complete(MSGS, stage="novelty", schema=NoveltyJudgement)
    assert r.ok and r.error is None
    assert isinstance(r.value, NoveltyJudgement) and r.value.closest_paper == 2
    assert r.text == GOOD
    assert r.call.tries == 2 and not r.call.cached and r.call.error is None
    assert server.n == 2
    first, retry = server.requests
    assert first["messages"] == MSGS
    assert first["response_format"]["type"] == "json_schema"
    assert first["response_format"]["json_schema"]["name"] == "NoveltyJudgement"
    # the retry shows the bad answer back with the validation error
    assert retry["messages"][:2] == MSGS
    assert retry["messages"][2] == {"role": "assistant", "content": "this is not json"}
    assert retry["messages"][3]["role"] == "user"
    assert "That answer could not be used" in retry["messages"][3]["content"]
    assert "Invalid JSON" in retry["messages"][3]["content"]
    # usage summed over both tries; unknown model costs nothing
    assert (r.call.prompt_tokens, r.call.completion_tokens) == (200, 40)
    assert r.call.cost_usd == 0.0
    assert llm.calls() == [r.call]


def test_schema_violation_is_retried_too(server, make_llm):
    wrong = json.dumps({"decision": "maybe", "closest_paper": 1, "reason": "r"})  # not in the Literal
    server.answers.extend([wrong, GOOD])
    r = make_llm().complete(MSGS, stage="novelty", schema=NoveltyJudgement)
    assert r.ok and r.call.tries == 2
    assert "decision" in server.requests[1]["messages"][-1]["content"]


def test_an_answer_cut_off_at_its_limit_is_asked_again_with_more_room(server, make_llm):
    """An answer that stops at max_tokens would stop at the same place if asked again as it was: the
    next try gets twice the room (up to 4x the caller's budget), without the cut answer shown back."""
    long_good = json.dumps({"decision": "novel", "closest_paper": 2, "reason": "x" * 100})
    server.chars_per_token = 1.0
    server.respond = lambda body: long_good            # 155 characters: more than 100 "tokens" allow
    llm = make_llm(max_retries=2)
    r = llm.complete(MSGS, stage="novelty", schema=NoveltyJudgement, max_tokens=50)
    assert r.ok and r.call.tries == 3, r.error
    assert [q["max_tokens"] for q in server.requests] == [50, 100, 200]
    assert all(q["messages"] == MSGS for q in server.requests)
    # remembered under the caller's request: asked again, the answer comes from the cache
    again = llm.complete(MSGS, stage="novelty", schema=NoveltyJudgement, max_tokens=50)
    assert again.ok and again.call.cached and server.n == 3


def test_an_answer_still_cut_off_fails_and_names_the_limit(server, make_llm):
    server.chars_per_token = 1.0
    server.respond = lambda body: json.dumps({"decision": "novel", "closest_paper": 2, "reason": "y" * 150})
    r = make_llm(max_retries=3).complete(MSGS, stage="novelty", schema=NoveltyJudgement, max_tokens=20)
    assert not r.ok and "cut off at the answer limit of 80 tokens" in r.error
    assert [q["max_tokens"] for q in server.requests] == [20, 40, 80, 80]  # 4x the budget at most


def test_an_answer_that_loops_until_its_limit_is_not_asked_again_with_more_room(server, make_llm):
    """A model repeating itself up to the limit would loop again with more room: the call ends at
    once with that reason, and the failure is remembered."""
    server.chars_per_token = 1.0
    server.respond = lambda body: "Here is the fix:\n```python\n" + "x = x + 1\nprint(x)\n" * 400
    llm = make_llm(max_retries=3)
    r = llm.complete(MSGS, stage="debug", parse=json.loads, max_tokens=1500)
    assert not r.ok and "repeated itself until the answer limit of 1500 tokens" in r.error
    assert server.n == 1 and r.call.tries == 1
    again = llm.complete(MSGS, stage="debug", parse=json.loads, max_tokens=1500)
    assert not again.ok and again.call.cached and server.n == 1


def test_only_a_repeating_answer_is_judged_a_loop():
    import random

    from resources.llm import repeats_itself

    rng = random.Random(0)
    words = ["loss", "model", "batch", "epoch", "train", "value", "grad", "mean", "scale", "data"]
    varied = "\n".join(f"{rng.choice(words)}_{i} = {rng.choice(words)}({rng.randint(0, 999)}) * {rng.random():.4f}"
                       for i in range(120))
    assert not repeats_itself(varied)
    assert repeats_itself(varied[:600] + "\nreturn the answer in the format\n" * 60)
    assert not repeats_itself("abc" * 100)  # too short to tell


def test_a_bounded_idea_list_tells_the_grammar_its_count_and_still_takes_more():
    from resources.llm import strict_schema
    from schemas.llm_outputs import idea_list

    bounded = idea_list(2)
    assert bounded.__name__ == "IdeaList" and strict_schema(bounded)["properties"]["ideas"]["maxItems"] == 2
    draft = {"Name": "a", "Title": "t", "Experiment": "e", "Summary": "s", "References": [], "Builds_on": [],
             "method_card": None, "code_place": None}
    assert len(bounded.model_validate_json(json.dumps({"ideas": [draft] * 3})).ideas) == 3  # the caller keeps n


def test_stays_invalid_fails_after_max_retries_and_is_remembered(server, make_llm):
    server.respond = lambda body: "still not json"
    llm = make_llm(max_retries=2)
    r = llm.complete(MSGS, stage="novelty", schema=NoveltyJudgement)
    assert not r.ok and r.value is None
    assert server.n == 3  # max_retries + 1
    assert r.call.tries == 3
    assert r.error.startswith("invalid answer (try 3): ")
    assert r.call.error == r.error
    assert r.text == "still not json"
    assert (r.call.prompt_tokens, r.call.completion_tokens) == (300, 60)

    # the same call again: the failure comes from the cache, no new request
    again = make_llm(max_retries=2).complete(MSGS, stage="novelty", schema=NoveltyJudgement)
    assert server.n == 3
    assert not again.ok and again.call.cached and again.error == r.error


def test_success_served_from_cache_with_zero_requests(server, make_llm):
    server.answers.append(GOOD)
    r1 = make_llm().complete(MSGS, stage="novelty", schema=NoveltyJudgement)
    assert r1.ok and server.n == 1
    llm2 = make_llm()  # a fresh resource (another process) with the same cache folder
    r2 = llm2.complete(MSGS, stage="novelty", schema=NoveltyJudgement)
    assert server.n == 1
    assert r2.ok and r2.call.cached and r2.value == r1.value and r2.call.tries == 0
    assert usage_totals(llm2.calls())["llm_cached_calls"] == 1


def test_cache_key_covers_the_request(server, make_llm):
    server.respond = lambda body: GOOD
    make_llm().complete(MSGS, stage="a", schema=NoveltyJudgement)
    make_llm().complete(MSGS, stage="b", schema=NoveltyJudgement)  # stage is not part of the request
    hit = make_llm().complete(MSGS, stage="a", schema=NoveltyJudgement, item="t/r1/idea")  # nor is the item
    assert server.n == 1
    assert hit.call.cached and hit.call.item == "t/r1/idea"  # accounted to the idea even when cached
    assert "item" not in json.dumps(server.requests[0])
    make_llm().complete(MSGS + [{"role": "user", "content": "more"}], stage="a", schema=NoveltyJudgement)
    make_llm(temperature=0.7).complete(MSGS, stage="a", schema=NoveltyJudgement)
    make_llm(model="m2").complete(MSGS, stage="a", schema=NoveltyJudgement)
    make_llm().complete(MSGS, stage="a", schema=NoveltyJudgement, max_tokens=64)
    assert server.n == 5
    make_llm(use_cache=False).complete(MSGS, stage="a", schema=NoveltyJudgement)
    assert server.n == 6


def test_transport_error_is_not_cached(server, make_llm):
    server.status = 400  # a 4xx the openai client does not retry
    r = make_llm().complete(MSGS, stage="x", schema=NoveltyJudgement)
    assert not r.ok and r.error.startswith("request failed: BadRequestError")
    assert server.n == 1 and r.call.tries == 1
    server.status = 200
    server.answers.append(GOOD)
    r2 = make_llm().complete(MSGS, stage="x", schema=NoveltyJudgement)
    assert r2.ok and not r2.call.cached and server.n == 2


def test_free_text_with_parse(server, make_llm):
    def parse(s: str) -> int:
        if not s.strip().isdigit():
            raise ValueError(f"expected a number, got {s!r}")
        return int(s)

    server.answers.extend(["seven", "7"])
    r = make_llm().complete(MSGS, stage="n", parse=parse)
    assert r.ok and r.value == 7 and r.call.tries == 2
    assert "response_format" not in server.requests[0]
    assert "expected a number, got 'seven'" in server.requests[1]["messages"][-1]["content"]


def test_plain_text_without_schema_or_parse(server, make_llm):
    server.answers.append("hello")
    r = make_llm().complete(MSGS, stage="t")
    assert r.ok and r.value == "hello" and r.call.tries == 1


def test_cost_for_known_model(server, make_llm):
    server.answers.append(GOOD)
    r = make_llm(model="gpt-4o-mini").complete(MSGS, stage="novelty", schema=NoveltyJudgement)
    assert server.requests[0]["model"] == "gpt-4o-mini"
    assert r.call.cost_usd == pytest.approx((100 * 0.15 + 20 * 0.60) / 1e6)
    assert r.call.cost_usd > 0


def test_price_usd():
    assert price_usd("gpt-4o", 1_000_000, 1_000_000) == pytest.approx(12.5)
    assert price_usd("deepseek-chat", 2_000, 0) == pytest.approx(0.00054)
    assert all(price_usd(m, 1000, 1000) > 0 for m in PRICES)
    assert price_usd("qwen2.5-1.5b-instruct", 10**6, 10**6) == 0.0
    assert price_usd("m", 10**6, 10**6) == 0.0


def test_usage_totals():
    calls = [LLMCall(stage="a", model="m", prompt_tokens=10, completion_tokens=5, cost_usd=0.001),
             LLMCall(stage="a", model="m", prompt_tokens=7, completion_tokens=1, cached=True),
             LLMCall(stage="b", model="m", error="invalid answer (try 3): x", cost_usd=0.0000004)]
    assert usage_totals(calls) == {"llm_calls": 3, "llm_cached_calls": 1, "llm_failed_calls": 1,
                                   "prompt_tokens": 17, "completion_tokens": 6, "cost_usd": 0.001}
    assert usage_totals([])["llm_calls"] == 0


def test_item_is_recorded_on_the_call(server, make_llm):
    server.answers.extend([GOOD, GOOD])
    llm = make_llm(model="gpt-4o-mini")
    llm.complete(MSGS, stage="novelty", schema=NoveltyJudgement, item="t/r1/a")
    llm.complete(MSGS + [{"role": "user", "content": "again"}], stage="ideas", schema=NoveltyJudgement)
    assert [c.item for c in llm.calls()] == ["t/r1/a", None]


def test_sampling_overrides_are_part_of_the_request(server, make_llm):
    """A resampled call (temperature/seed given) is sent with them and cached apart from the greedy one."""
    server.answers.extend([GOOD, GOOD])
    llm = make_llm()
    llm.complete(MSGS, stage="debug", schema=NoveltyJudgement)
    again = llm.complete(MSGS, stage="debug", schema=NoveltyJudgement, temperature=0.8, seed=1)
    assert not again.call.cached and len(server.requests) == 2
    assert (server.requests[0]["temperature"], server.requests[0]["seed"]) == (llm.temperature, llm.seed)
    assert (server.requests[1]["temperature"], server.requests[1]["seed"]) == (0.8, 1)
    assert llm.complete(MSGS, stage="debug", schema=NoveltyJudgement, temperature=0.8, seed=1).call.cached


def test_usage_by_item_sums_per_idea():
    from assets.shared.metadata import usage_by_item, usage_metadata

    calls = [LLMCall(stage="novelty", model="m", prompt_tokens=10, completion_tokens=5, cost_usd=0.001, item="i1"),
             LLMCall(stage="ideas", model="m", prompt_tokens=50, completion_tokens=40, cost_usd=0.01),
             LLMCall(stage="debug", model="m", prompt_tokens=7, completion_tokens=3, cost_usd=0.0005, item="i1"),
             LLMCall(stage="debug", model="m", prompt_tokens=1, completion_tokens=2, cached=True, item="i2")]
    by = usage_by_item(calls)
    assert list(by) == ["i1", None, "i2"]
    assert by["i1"] == {"llm_calls": 2, "prompt_tokens": 17, "completion_tokens": 8, "cost_usd": 0.0015}
    assert by[None] == {"llm_calls": 1, "prompt_tokens": 50, "completion_tokens": 40, "cost_usd": 0.01}
    assert by["i2"]["llm_calls"] == 1 and by["i2"]["cost_usd"] == 0
    assert usage_by_item([]) == {}
    meta = usage_metadata(calls, by_idea=True)
    assert meta["usage_by_idea"].value == {"i1": by["i1"], "i2": by["i2"]}  # round-level calls stay out
    assert meta["prompt_tokens"] == 68
    assert "usage_by_idea" not in usage_metadata(calls)


def test_share_usage_adds_up_to_the_total():
    from assets.shared.metadata import share_usage

    total = {"llm_calls": 10, "prompt_tokens": 1000, "completion_tokens": 200, "cost_usd": 0.03}
    by_idea = {"a": {"llm_calls": 4, "prompt_tokens": 400, "completion_tokens": 80, "cost_usd": 0.012},
               "b": {"llm_calls": 1, "prompt_tokens": 100, "completion_tokens": 20, "cost_usd": 0.003},
               "dropped": {"llm_calls": 2, "prompt_tokens": 200, "completion_tokens": 40, "cost_usd": 0.006}}
    out = share_usage(total, by_idea, ["a", "b", "c"])
    assert out["a"][0]["prompt_tokens"] == 400 and out["c"][0]["llm_calls"] == 0  # c: no call of its own
    # the rest (round-level calls and the dropped idea's) is shared evenly
    assert out["a"][1] == out["c"][1] and out["a"][1]["prompt_tokens"] == pytest.approx(500 / 3)
    for k, v in total.items():
        assert sum(own[k] + shared[k] for own, shared in out.values()) == pytest.approx(v)
    assert share_usage(total, by_idea, []) == {}


def _walk(node, found):
    if isinstance(node, dict):
        found.append(node)
        for v in node.values():
            _walk(v, found)
    elif isinstance(node, list):
        for v in node:
            _walk(v, found)
    return found


def test_strict_schema_idea_list():
    s = strict_schema(IdeaList)
    text = json.dumps(s)
    assert "$ref" not in text and "$defs" not in text
    nodes = _walk(s, [])
    objects = [n for n in nodes if n.get("type") == "object"]
    assert len(objects) == 2  # IdeaList and the inlined IdeaDraft
    for o in objects:
        assert o["required"] == list(o["properties"])
        assert o["additionalProperties"] is False
    assert not any("default" in n for n in nodes)
    draft = s["properties"]["ideas"]["items"]
    assert set(draft["properties"]) == {"Name", "Title", "Experiment", "Summary", "References", "Builds_on",
                                        "method_card", "code_place"}
    assert draft["properties"]["References"] == {
        "type": "array", "items": {"type": "integer"}, "description": "numbers of the papers used",
        "maxItems": 5}
    # the strict schema still accepts what the model accepts
    IdeaList.model_validate({"ideas": [{"Name": "a", "Title": "b", "Experiment": "c", "Summary": "d",
                                        "References": [], "Builds_on": []}]})


def test_strict_schema_does_not_touch_the_model():
    before = IdeaList.model_json_schema()
    strict_schema(IdeaList)
    assert IdeaList.model_json_schema() == before


def test_strict_schema_keeps_property_named_title():
    class Doc(BaseModel):
        title: str
        default: int

    s = strict_schema(Doc)
    assert set(s["properties"]) == {"title", "default"}
    assert s["required"] == ["title", "default"]


def test_map_keeps_order_with_concurrency(server, make_llm):
    def respond(body):
        n = int(body["messages"][-1]["content"])
        time.sleep(0.02 * (6 - n))  # the first items finish last
        return str(n * n)

    server.respond = respond
    llm = make_llm(max_concurrency=4)
    assert llm.concurrency() == 4
    items = list(range(6))
    out = llm.map(lambda i: llm.complete([{"role": "user", "content": str(i)}], stage="sq", parse=int).value, items)
    assert out == [i * i for i in items]
    assert server.n == 6
    assert len(llm.calls()) == 6


def test_map_sequential_when_concurrency_one(make_llm):
    llm = make_llm(max_concurrency=1)
    seen = []
    assert llm.map(lambda x: seen.append(x) or -x, [3, 1, 2]) == [-3, -1, -2]
    assert seen == [3, 1, 2]


def test_map_of_a_shared_prefix_sends_the_first_alone_on_the_local_server_only(make_llm, monkeypatch):
    """Requests that begin alike reach the local server first one alone (so its prompt is cached
    before the others read it), then the rest at once; an endpoint of its own gets them all at once."""
    import threading

    started = []

    def in_flight(llm, shared_prefix):
        now, most, lock, first_alone = [0], [0], threading.Lock(), []

        def one(x):
            with lock:
                started.append(x)
                now[0] += 1
                most[0] = max(most[0], now[0])
                if x == 1:
                    first_alone.append(now[0] == 1)
            time.sleep(0.05)
            with lock:
                if x == 1:  # nothing else started while the first was in flight
                    first_alone.append(now[0] == 1)
                now[0] -= 1
            return -x
        assert llm.map(one, [1, 2, 3, 4], shared_prefix=shared_prefix) == [-1, -2, -3, -4]
        return most[0], all(first_alone)

    remote = make_llm(max_concurrency=4)
    assert in_flight(remote, True)[0] > 1 and in_flight(remote, False)[0] > 1
    assert not in_flight(remote, True)[1]  # remote: the first shares the server from the start
    local = make_llm(max_concurrency=4)
    monkeypatch.setattr(type(local), "is_local", lambda self: True)
    monkeypatch.setattr(type(local), "concurrency", lambda self: 2)
    monkeypatch.setattr(type(local), "_asked", lambda self: len(started))  # every item asks the server
    assert in_flight(local, True) == (2, True)
    assert in_flight(local, False)[0] == 2


def test_map_of_a_shared_prefix_goes_one_by_one_until_the_server_was_asked(server, make_llm, monkeypatch):
    """Items answered without the server (a rule, the response cache) do not warm its prompt cache:
    the local server gets items one by one until one has asked it, then the rest at once."""
    import threading

    llm = make_llm(max_concurrency=4)
    monkeypatch.setattr(type(llm), "is_local", lambda self: True)
    monkeypatch.setattr(type(llm), "concurrency", lambda self: 2)
    server.respond = lambda body: "ok"
    order, lock, alone = [], threading.Lock(), []
    now = [0]

    def one(x):
        with lock:
            now[0] += 1
            order.append(x)
            if x in ("rule", "asks"):
                alone.append(now[0] == 1)
        if x != "rule":
            llm.complete([{"role": "user", "content": f"item {x}"}], stage="s")
        else:
            time.sleep(0.02)
        with lock:
            now[0] -= 1
        return x

    items = ["rule", "asks", "a", "b", "c"]
    assert llm.map(one, items, shared_prefix=True) == items
    assert order[:2] == ["rule", "asks"] and all(alone)
    assert server.n == 4


def test_remote_endpoint_settings(make_llm):
    llm = make_llm()
    assert not llm.is_local()
    assert llm.model_name() == "m"
    assert llm.resolved_edit_format() == "search_replace"
    assert make_llm(edit_format="whole").resolved_edit_format() == "whole"


# -- typed error kinds -------------------------------------------------------------------

def test_error_kind_is_a_value_not_parsed_from_the_message(server, make_llm):
    from resources.llm import INVALID_ANSWER, REQUEST_FAILED, RejectedAnswer

    def parse(text: str) -> str:
        if text == "same":
            raise RejectedAnswer("no_op", "nothing changed")  # the message does not start with the kind's words
        raise ValueError("cannot read it")

    server.respond = lambda body: "same"
    llm = make_llm(max_retries=1)
    r = llm.complete(MSGS, stage="edit", parse=parse)
    assert not r.ok and r.error_kind == "no_op" and r.call.error_kind == "no_op"
    assert r.error.startswith("invalid answer (try 2): ")  # the text stays for people and prompts
    # the cached failure keeps its kind: the parser is asked again on the remembered answer
    again = make_llm(max_retries=1).complete(MSGS, stage="edit", parse=parse)
    assert again.call.cached and again.error_kind == "no_op" and server.n == 2

    server.respond = lambda body: "other"
    r = llm.complete(MSGS + [{"role": "user", "content": "2"}], stage="edit", parse=parse)
    assert r.error_kind == INVALID_ANSWER  # a parser error without a kind
    r = llm.complete(MSGS + [{"role": "user", "content": "3"}], stage="x", schema=NoveltyJudgement)
    assert r.error_kind == INVALID_ANSWER  # a schema violation
    server.status = 400
    r = llm.complete(MSGS + [{"role": "user", "content": "4"}], stage="x", schema=NoveltyJudgement)
    assert r.error_kind == REQUEST_FAILED
    server.status = 200
    server.answers.append(GOOD)
    r = llm.complete(MSGS + [{"role": "user", "content": "5"}], stage="x", schema=NoveltyJudgement)
    assert r.ok and r.error_kind is None and r.call.error_kind is None


def test_edit_errors_reach_the_patch_status_as_kinds(server, make_llm):
    from assets.editing.edit_formats import EditError, apply_edit, edit_status

    src = "x = 1\nprint(x)\n"
    server.respond = lambda body: f"```python\n{src}```"  # the file unchanged
    llm = make_llm(max_retries=0)
    r = llm.complete(MSGS, stage="patch", parse=lambda t: apply_edit(src, t, "whole"))
    assert r.error_kind == "no_op" and edit_status(r) == "no_op"
    server.respond = lambda body: "```python\nx = (\n```"
    r = llm.complete(MSGS + [{"role": "user", "content": "2"}], stage="patch",
                     parse=lambda t: apply_edit(src, t, "whole"))
    assert r.error_kind == "syntax_error" and edit_status(r) == "syntax_error"

    def dishonest(t):
        raise EditError("dishonest", "the fix removes the evaluation")

    r = llm.complete(MSGS + [{"role": "user", "content": "3"}], stage="patch", parse=dishonest)
    assert edit_status(r) == "dishonest"
    r = llm.complete(MSGS + [{"role": "user", "content": "4"}], stage="patch", schema=NoveltyJudgement)
    assert r.error_kind == "invalid_answer" and edit_status(r) == "llm_failed"


# -- usage per stage -----------------------------------------------------------------------

def test_track_collects_the_calls_of_its_block(server, make_llm):
    server.respond = lambda body: body["messages"][-1]["content"]
    llm = make_llm(max_concurrency=4)
    llm.complete([{"role": "user", "content": "before"}], stage="a")
    with llm.track("outer") as outer:
        llm.complete([{"role": "user", "content": "o1"}], stage="a")
        with llm.track("inner") as inner:
            # calls made on llm.map's worker threads count in the open blocks too
            llm.map(lambda i: llm.complete([{"role": "user", "content": f"i{i}"}], stage="b"), range(3))
        llm.complete([{"role": "user", "content": "o2"}], stage="a", item="t/r1/x")
    llm.complete([{"role": "user", "content": "after"}], stage="a")
    assert outer.stage == "outer" and len(outer.calls) == 5 and len(inner.calls) == 3
    assert {c.stage for c in inner.calls} == {"b"}
    assert [c.item for c in outer.calls].count("t/r1/x") == 1
    assert outer.totals()["prompt_tokens"] == 5 * 100
    assert len(llm.calls()) == 7  # the resource's whole history is unchanged
    assert not llm._tracking  # every block closed

    from assets.shared.metadata import usage_metadata

    meta = usage_metadata(outer, by_idea=True)
    assert meta["llm_calls"] == 5 and meta["usage_by_idea"].value == {
        "t/r1/x": {"llm_calls": 1, "prompt_tokens": 100, "completion_tokens": 20, "cost_usd": 0.0}}


def test_track_closes_on_error(server, make_llm):
    llm = make_llm()
    with pytest.raises(RuntimeError), llm.track("s"):
        raise RuntimeError("boom")
    assert not llm._tracking
