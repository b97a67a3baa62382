"""What the sandbox tests share: a skip mark where bubblewrap cannot run (their `ws`
workspace fixture is in conftest.py)."""
from __future__ import annotations

import pytest

from resources.sandbox import sandbox_available

_OK, _WHY = sandbox_available()
needs_bwrap = pytest.mark.skipif(not _OK, reason=f"sandbox unavailable: {_WHY}")
