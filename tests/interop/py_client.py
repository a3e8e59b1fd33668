#!/usr/bin/env python3
"""Interop check: drives mcp-harbor with the official Python SDK client (PyPI `mcp` 2.x).

Usage:
    ~/.cache/mcp-harbor/pyenv/bin/python tests/interop/py_client.py http://127.0.0.1:PORT/t/demo

Runs the same core flow twice, over Streamable HTTP (`<base>/mcp`) and over the legacy
2024-11-05 HTTP+SSE transport (`<base>/sse`): initialize, list tools, call `echo`, read
`test://static-text`, get `test_prompt_with_arguments`, answer an elicitation (`test_elicitation`)
and a sampling request (`test_sampling`) from the client's callbacks.

Prints one "ok - ..."/"not ok - ..." line per check and finally "py-client: N passed, M failed";
exits 1 on any failure. The whole run is bounded by INTEROP_TIMEOUT_SECS (default 60).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import anyio
import mcp_types as types
from mcp.client.session import ClientRequestContext, ClientSession
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # py_common.py is beside this script
from py_common import Checks, describe, text_of  # noqa: E402

TIMEOUT_SECS = float(os.environ.get("INTEROP_TIMEOUT_SECS", "60"))
# Per transport: bounded separately so one hung transport still lets the other report.
TRANSPORT_TIMEOUT_SECS = TIMEOUT_SECS / 2 - 1

ELICIT_CONTENT = {"username": "pyuser", "email": "pyuser@example.com"}
SAMPLING_TEXT = "Sampled answer from the python interop client: 42"
STATIC_TEXT = "This is the content of the static text resource."
# Elicitation (elicitation/create) exists from protocol 2025-06-18 on.
ELICITATION_SINCE = "2025-06-18"

checks = Checks()
check = checks.check
step = checks.step


class Counters:
    def __init__(self) -> None:
        self.elicit = 0
        self.sampling = 0


async def run_flow(label: str, connect: Callable[[], AbstractAsyncContextManager[Any]]) -> None:
    counters = Counters()

    async def elicitation_callback(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        counters.elicit += 1
        return types.ElicitResult(action="accept", content=dict(ELICIT_CONTENT))

    async def sampling_callback(
        context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.ErrorData:
        counters.sampling += 1
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=SAMPLING_TEXT),
            model="interop-test-model",
            stop_reason="endTurn",
        )

    async with connect() as (read, write):
        async with ClientSession(
            read,
            write,
            read_timeout_seconds=15,
            sampling_callback=sampling_callback,
            elicitation_callback=elicitation_callback,
            client_info=types.Implementation(name="mcp-harbor-interop-py", version="1.0.0"),
        ) as session:
            init: types.InitializeResult | None = None

            async def do_initialize() -> None:
                nonlocal init
                init = await session.initialize()
                check(
                    f"{label}: initialize (protocol {init.protocol_version})",
                    bool(init.server_info.name) and init.capabilities.tools is not None,
                    init.model_dump(by_alias=True, exclude_none=True),
                )

            await step(f"{label}: initialize", do_initialize)
            if init is None:
                return
            version = init.protocol_version

            async def do_list_tools() -> None:
                names: list[str] = []
                cursor: str | None = None
                while True:
                    page = await session.list_tools(
                        params=types.PaginatedRequestParams(cursor=cursor) if cursor else None
                    )
                    names += [t.name for t in page.tools]
                    cursor = page.next_cursor
                    if not cursor:
                        break
                expected = ["echo", "add", "test_simple_text", "test_elicitation", "test_sampling"]
                missing = [n for n in expected if n not in names]
                check(f"{label}: tools/list has expected tools", not missing, f"missing {missing}; got {names}")

            async def do_echo() -> None:
                r = await session.call_tool("echo", {"text": "hello"})
                check(f"{label}: echo returns its text", not r.is_error and text_of(r) == "hello", r)

            async def do_read() -> None:
                r = await session.read_resource("test://static-text")
                c = r.contents[0] if r.contents else None
                check(
                    f"{label}: resources/read test://static-text",
                    isinstance(c, types.TextResourceContents)
                    and str(c.uri) == "test://static-text"
                    and c.text == STATIC_TEXT,
                    r,
                )

            async def do_prompt() -> None:
                r = await session.get_prompt("test_prompt_with_arguments", {"arg1": "alpha-1", "arg2": "beta-2"})
                text = "\n".join(m.content.text for m in r.messages if isinstance(m.content, types.TextContent))
                check(
                    f"{label}: prompts/get test_prompt_with_arguments has both args",
                    "alpha-1" in text and "beta-2" in text,
                    r,
                )

            async def do_elicit() -> None:
                r = await session.call_tool("test_elicitation", {"message": "Who are you?"})
                t = text_of(r)
                if version >= ELICITATION_SINCE:
                    check(
                        f"{label}: elicitation answered (accept + content reflected)",
                        not r.is_error
                        and counters.elicit == 1
                        and "accept" in t
                        and ELICIT_CONTENT["username"] in t
                        and ELICIT_CONTENT["email"] in t,
                        f"callbacks={counters.elicit} result={r}",
                    )
                else:
                    check(
                        f"{label}: elicitation refused gracefully at {version} (isError result)",
                        bool(r.is_error) and counters.elicit == 0,
                        f"callbacks={counters.elicit} result={r}",
                    )

            async def do_sampling() -> None:
                r = await session.call_tool("test_sampling", {"prompt": "What is the answer?"})
                check(
                    f"{label}: sampling answered (callback text reflected)",
                    not r.is_error and counters.sampling == 1 and SAMPLING_TEXT in text_of(r),
                    f"callbacks={counters.sampling} result={r}",
                )

            await step(f"{label}: tools/list", do_list_tools)
            await step(f"{label}: echo", do_echo)
            await step(f"{label}: resources/read", do_read)
            await step(f"{label}: prompts/get", do_prompt)
            await step(f"{label}: elicitation", do_elicit)
            await step(f"{label}: sampling", do_sampling)


async def run_transport(label: str, connect: Callable[[], AbstractAsyncContextManager[Any]]) -> None:
    try:
        with anyio.fail_after(TRANSPORT_TIMEOUT_SECS):
            await run_flow(label, connect)
        closed_cleanly = True
        detail = None
    except TimeoutError:
        closed_cleanly = False
        detail = f"timed out after {TRANSPORT_TIMEOUT_SECS:.0f} s"
    except BaseException as exc:  # transport errors surface as (nested) exception groups
        if isinstance(exc, KeyboardInterrupt | SystemExit):
            raise
        closed_cleanly = False
        detail = f"threw: {describe(exc)}"
    check(f"{label}: session ran and closed", closed_cleanly, detail)


async def main(base: str) -> None:
    base = base.rstrip("/")
    with anyio.move_on_after(TIMEOUT_SECS) as scope:
        await run_transport("streamable-http", lambda: streamable_http_client(f"{base}/mcp"))
        await run_transport("legacy-sse", lambda: sse_client(f"{base}/sse", timeout=10, sse_read_timeout=30))
    if scope.cancelled_caught:
        check(f"finished within {TIMEOUT_SECS:.0f} s", False, "overall timeout")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: py_client.py <base-url>   (e.g. http://127.0.0.1:8080/t/demo)", file=sys.stderr)
        sys.exit(2)
    try:
        anyio.run(main, sys.argv[1])
    except BaseException as exc:  # never leave without the summary line
        if isinstance(exc, KeyboardInterrupt):
            raise
        check("run", False, f"threw: {describe(exc)}")
    print(f"py-client: {checks.passed} passed, {checks.failed} failed", flush=True)
    sys.exit(1 if checks.failed else 0)
