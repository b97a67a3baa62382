"""The scipip idea source's scripted entity answers and its LLM."""
from __future__ import annotations

import numpy as np

from resources.llm import LLM
from tests.support.fake_llm import Script


def unit(*v) -> np.ndarray:
    a = np.asarray(v, dtype=np.float32)
    return a / np.linalg.norm(a)


class EntityScript(Script):
    """Entities from the fake's vocabulary; malformed JSON for any text containing BROKEN."""

    def __init__(self):
        super().__init__()
        self.asked: list[str] = []

    def answer(self, req):
        fmt = req.get("response_format") or {}
        if fmt.get("json_schema", {}).get("name") == "Entities":
            text = req["messages"][1]["content"]
            self.asked.append(text)
            if "BROKEN" in text:
                self.count("Entities")
                return '{"entities": ["unterminated'
        return super().answer(req)


def llm_for(server, **kw) -> LLM:
    return LLM(base_url=server.base_url, api_key="sk-test", model="fake-model", max_retries=1,
               use_cache=False, **kw)  # no response cache: only the memo can spare a request
