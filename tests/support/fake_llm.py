"""A scripted OpenAI-compatible chat server on 127.0.0.1 for fast tests.

It answers like a well-behaved model for each stage (recognised by the JSON schema name or
the prompt; the novelty check always searches twice, then says novel), with a few deliberate
faults so the error paths run for real: one idea's patch has a bug the debugging stage must
fix, and one idea's patch answers are always malformed."""
from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

FENCE = re.compile(r"```python\n(.*?)```", re.S)
# the hyper-parameter lines the scripted edits touch (module constants, as in every template)
LR_LINE = re.compile(r"^LR = (\S+)", re.M)
TORCH_OPT = re.compile(r"(torch\.optim\.\w+\(.*?lr=LR)\)")  # torch refuses a negative lr
EPOCHS_LINE = re.compile(r"^EPOCHS = (\d+)", re.M)


def _code_in(messages) -> str:
    for m in messages:
        hit = FENCE.search(m["content"])
        if hit:
            return hit.group(1)
    return ""


def completion(model: str, text: str) -> dict:
    """An OpenAI chat.completion body answering `text` (fixed token counts)."""
    return {"id": "x", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}}


def send_json(handler: BaseHTTPRequestHandler, status: int, payload: dict) -> None:
    data = json.dumps(payload).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


def arena_answer(req: dict, quality) -> str | None:
    """The answer to an Idea Arena judgement (None when `req` asks for something else): the idea
    whose shown line `quality` (a callable on that text) rates higher wins every criterion; equal
    ones tie."""
    from assets.filtered_ideas.arena_prompts import CRITERIA

    if (req.get("response_format") or {}).get("json_schema", {}).get("name") != "ArenaJudgement":
        return None
    shown = dict(re.findall(r"^Idea ([AB]): (.*)$", req["messages"][-1]["content"], re.M))
    qa, qb = (quality(shown[x].strip()) for x in "AB")
    verdict = "A" if qa > qb else "B" if qb > qa else "tie"
    return json.dumps({"reason": "scripted", **{c: verdict for c in CRITERIA}})


class Script:
    """Decides the answer for one request; counts requests per stage."""

    def __init__(self):
        self.counts: dict[str, int] = {}
        self.lock = threading.Lock()
        self.epochs_before = 30  # EPOCHS before the buggy edit; the repair doubles it

    def count(self, stage: str) -> None:
        with self.lock:
            self.counts[stage] = self.counts.get(stage, 0) + 1

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def answer(self, req: dict) -> str:
        msgs = req["messages"]
        user = msgs[-1]["content"]
        fmt = req.get("response_format") or {}
        name = fmt.get("json_schema", {}).get("name") if fmt else None
        self.count(name or "text")
        if name == "TaskAttributes":
            return json.dumps({"task": "point cloud classification", "input": "3D point sets",
                               "output": "class label", "domain": "3D vision",
                               "evaluation": "accuracy", "search_query": "point cloud shape classification"})
        if name == "PaperJudgement":
            paper = user.split("\n", 1)[0].lower()
            same = "point" in paper and ("classif" in paper or "pointnet" in paper or "set" in paper)
            return json.dumps({"paper_task": "shape classification" if same else "other",
                               "relevance": "same_task" if same else "unrelated",
                               "attribute_match": "input_and_output_match" if same else "neither_matches",
                               "reason": "matches" if same else "different task"})
        if name in ("PaperRelevanceBatch", "PaperAttributesBatch"):  # batched ranking: one item per paper
            return json.dumps({"papers": [ranking_item(name, t) for t in re.findall(r"^Paper \d+: (.*)$", user, re.M)]})
        if name in ("PaperRelevance", "PaperAttributes"):  # ranking, one paper per request
            return json.dumps(ranking_item(name + "Batch", re.search(r"^Paper 1: (.*)$", user, re.M).group(1)))
        if name in ("PaperAttributesById", "PaperAttributesByIdBatch"):  # ranking: answers name the paper's id
            items = [{"id": i, **ranking_item(name, t)} for i, t in re.findall(r"^\[id (\S+)\] (.*)$", user, re.M)]
            return json.dumps(items[0] if name == "PaperAttributesById" else {"papers": items})
        if name is None and user.endswith("Answer yes or no."):  # ranking's yes/no question (no log-probabilities)
            same = ranking_item("PaperRelevanceBatch", re.search(r"^Paper: (.*)$", user, re.M).group(1))
            return "Yes" if same["relevance"] == "same_task" else "No"
        if name == "IdeaList" and "brainstorm" in user:
            return json.dumps({"ideas": brainstorm_ideas(user)})
        if name == "IdeaList" and "Retrieved papers" in user:  # the scipip source
            return json.dumps({"ideas": scipip_ideas(user)})
        if name == "ChainIdeas":  # the chains source: a recorded answer per chain
            return json.dumps(chain_answer(user))
        if name == "Entities":  # SciPIP's entity extraction: the known terms the text contains
            return json.dumps({"entities": entity_answer(user)})
        if name == "IdeaList":
            n = int(re.search(r"Propose (\d+) different ideas", user).group(1))
            rnd = user.count("\n- ") + 1  # more earlier ideas in later rounds -> different names
            ideas = [
                {"Name": f"negative_step_r{rnd}", "Title": f"Reverse the gradient step (round {rnd})",
                 "Experiment": "Set LR to a negative value.",
                 "Summary": f"Flip the sign of the learning rate to test the optimiser's direction, variant {rnd}.",
                 "References": [1], "Builds_on": []},
                {"Name": f"longer_training_r{rnd}", "Title": "Train for more epochs",
                 "Experiment": "Increase EPOCHS.",
                 "Summary": "Train the logistic regression for longer so it converges.",
                 "References": [], "Builds_on": []},
                # a later round's variant has its own title: the repeat rule drops a title an earlier round ran
                {"Name": f"fancy_kernel_r{rnd}",
                 "Title": "Add an RBF kernel feature map" + (f" (variant {rnd})" if rnd > 1 else ""),
                 "Experiment": "Map inputs through random Fourier features.",
                 "Summary": "Use random Fourier features so the linear model can draw curved boundaries.",
                 "References": [2], "Builds_on": []},
            ]
            return json.dumps({"ideas": ideas[:n]})
        if name == "NoveltyQuery":  # the first turn names the idea: search for its title
            title = re.search(r"Idea: (.*)", msgs[1]["content"]).group(1)
            return json.dumps({"query": title.lower()[:60]})
        if name == "NoveltyStep":  # one more search before deciding
            return json.dumps({"decision": "search_again", "query": "toy classification " + str(len(msgs)),
                               "closest_paper": 0, "reason": "not settled yet"})
        if name == "NoveltyJudgement":
            return json.dumps({"decision": "novel", "closest_paper": 1, "reason": "no paper does this"})
        if name == "RoundAnalysis":
            return json.dumps({"worked": "Longer training helped because the model had not converged.",
                               "failed": "A negative learning rate climbs the loss instead of descending.",
                               "next_direction": "Tune the learning rate schedule."})
        if name == "PlanDraft":
            return json.dumps({"changes": ["edit the constants at the top"], "location": "module constants",
                               "evaluation": "accuracy on the held-out points", "expected_effect": "better accuracy"})
        code = _code_in(msgs)
        if "Implement this idea" in user:
            if "Reverse the gradient" in user:  # LR = 0.05 -> LR = -0.05, or a torch optimiser ascends
                flipped = TORCH_OPT.sub(r"\1, maximize=True)", code, count=1) if TORCH_OPT.search(code) else \
                    LR_LINE.sub(r"LR = -\1", code, count=1)
                return "```python\n" + flipped + "```"
            if "more epochs" in user:  # a bug the debugger must repair
                hit = EPOCHS_LINE.search(code)
                self.epochs_before = int(hit.group(1)) if hit else self.epochs_before
                return "```python\n" + EPOCHS_LINE.sub("EPOCHS = EPOCH_COUNT", code, count=1) + "```"
            return "Sorry, I cannot write this code."  # malformed every time
        if "running it failed with" in user:  # EPOCHS = 30 -> EPOCH_COUNT -> 60
            return "```python\n" + code.replace("EPOCHS = EPOCH_COUNT", f"EPOCHS = {2 * self.epochs_before}") + "```"
        return "I do not understand."


def ranking_item(schema: str, title: str) -> dict:
    """A point-cloud classification paper by its title, or a detection paper on the same data."""
    t = title.lower()
    same = "point" in t and ("classif" in t or "pointnet" in t or "set" in t)
    if schema == "PaperRelevanceBatch":
        return {"relevance": "same_task" if same else "neighbouring_task"}
    return ({"task": "shape classification", "input": "point cloud", "output": "class label"} if same else
            {"task": "object detection", "input": "scene scans", "output": "bounding boxes"})


def brainstorm_ideas(user: str) -> list[dict]:
    """The brainstorm path (no papers): one name that clashes with the literature path, one
    near-copy of a literature idea (the independence filter must catch it) and one new idea."""
    n = int(re.search(r"brainstorm (\d+) different ideas", user).group(1))
    rnd = user.count("\n- ") + 1
    ideas = [
        {"Name": f"longer_training_r{rnd}", "Title": "Standardise the inputs",
         "Experiment": "Scale both features to zero mean and unit variance.",
         "Summary": "Standardise the two input features before training so gradient descent is well conditioned.",
         "References": [3], "Builds_on": []},
        {"Name": "train_until_converged", "Title": "Train longer",
         "Experiment": "Raise EPOCHS.", "Summary": "Train the logistic regression for longer so that it converges.",
         "References": [], "Builds_on": []},
        {"Name": "label_smoothing", "Title": "Smooth the labels",
         "Experiment": "Use targets 0.05 and 0.95.", "Summary": "Soften the 0/1 targets of the loss to 0.05/0.95 "
         "to keep the weights from growing without bound.", "References": [], "Builds_on": []},
    ]
    return ideas[:n]


# the terms the scripted entity extractor knows, most specific first
ENTITY_VOCAB = ("point cloud", "point set", "logistic regression", "gradient descent", "2d points", "segmentation",
                "graph convolution", "transformer", "attention", "voxel", "rotation", "augmentation",
                "classification")


def entity_answer(user: str) -> list[str]:
    """The vocabulary terms in the text after "Text:", at most 5 (a generic term when none)."""
    text = user.split("Text:\n", 1)[-1].split("\n\n", 1)[0].lower()
    return [t for t in ENTITY_VOCAB if t in text][:5] or ["research"]


def scipip_ideas(user: str) -> list[dict]:
    """The scipip source: one idea per retrieved paper shown (up to the number asked), citing it."""
    n = int(re.search(r"Propose (\d+) different ideas", user).group(1))
    shown = re.findall(r"^\[(\d+)\] (.*?) \(key terms: ", user, re.M)
    return [{"Name": f"adapt_paper_{i}", "Title": f"Adapt {title[:60]}",
             "Experiment": f"Carry the main trick of paper {i} over to the training loop.",
             "Summary": f"Borrow what '{title[:80]}' does and apply it to this small classifier.",
             "References": [int(i)], "Builds_on": []} for i, title in shown[:n]]


# what the chains source's recorded ideas change, one per idea: distinct enough that the independence
# filter keeps them apart
CHAIN_STEPS = ("Learn the feature map of the inputs with a small hidden layer instead of the fixed linear one.",
               "Decay the learning rate on a cosine schedule over the epochs instead of keeping it fixed.",
               "Weight each training point by how hard it was in the previous epoch, as boosting does.",
               "Average the weights of the last epochs instead of keeping only the final ones.")


def chain_answer(user: str) -> dict:
    """The chains source's recorded answer for one chain: a trend naming the chain's first and last
    papers, a predicted step, and one idea per paper from the newest back (up to the number asked),
    each citing its paper and changing a different part of the code (CHAIN_STEPS)."""
    n = int(re.search(r"ideas: (\d+) different ideas", user).group(1))
    shown = re.findall(r"^\[(\d+)\] (?:\d+|year unknown): (.*?)(?: \((?:cites|close in content).*)?$", user, re.M)
    first, last = shown[0][1][:60], shown[-1][1][:60]
    ideas = [{"Name": f"next_step_after_{i}", "Title": f"Take the next step after {title[:50]}",
              "Experiment": step, "Summary": f"Following '{title[:60]}': {step}",
              "References": [int(i)], "Builds_on": []} for (i, title), step in zip(reversed(shown), CHAIN_STEPS)]
    return {"trend": f"From {first} to {last}, each paper replaced a fixed step with a learned one.",
            "prediction": "Learn the remaining fixed step as well.", "ideas": ideas[:n]}


class FakeLLMServer:
    def __init__(self, script: Script | None = None):
        """`script`: anything with `answer(request) -> str` (default: the round's Script)."""
        self.script = script or Script()
        script = self.script

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                send_json(self, 200, completion(body["model"], script.answer(body)))

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
