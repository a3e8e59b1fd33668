"""Helpers shared by the interop checks written with the official Python SDK (PyPI `mcp` 2.x):
py_client.py, py_modern.py and federation_py.py.

Those are run as scripts (`$PYENV/bin/python tests/interop/x.py ...`) and import this module from
their own directory:

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from py_common import Checks, describe, text_of

`Checks` counts the checks and prints one line per check ("ok - name" or
"not ok - name (detail)" by default; the words and how a detail is shown are the script's);
`step` runs one part of a flow and turns an exception into a failed check.
"""

from __future__ import annotations

import traceback
from collections.abc import Awaitable, Callable
from typing import Any

import mcp_types as types


class Checks:
    def __init__(self, ok: str = "ok", not_ok: str = "not ok", detail: Callable[[Any], str] = str) -> None:
        self.ok = ok
        self.not_ok = not_ok
        self.detail = detail
        self.passed = 0
        self.failed = 0

    def check(self, name: str, cond: bool, detail: Any = None) -> None:
        if cond:
            self.passed += 1
            print(f"{self.ok} - {name}", flush=True)
        else:
            self.failed += 1
            suffix = f" ({self.detail(detail)})" if detail is not None else ""
            print(f"{self.not_ok} - {name}{suffix}", flush=True)

    async def step(self, name: str, fn: Callable[[], Awaitable[None]]) -> None:
        try:
            await fn()
        except Exception as exc:  # cancellation (BaseException) still propagates
            self.check(name, False, f"threw: {describe(exc)}")


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


def describe(exc: BaseException) -> str:
    """One line per leaf exception (task groups wrap transport errors in exception groups)."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(describe(e) for e in exc.exceptions)
    return "".join(traceback.format_exception_only(type(exc), exc)).strip().replace("\n", " ")
