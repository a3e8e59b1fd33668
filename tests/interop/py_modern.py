#!/usr/bin/env python3
"""Interop check: drives mcp-harbor with the official Python SDK's high-level client at the
2026-07-28 ("stateless") protocol revision.

Usage:
    ~/.cache/mcp-harbor/pyenv/bin/python tests/interop/py_modern.py http://127.0.0.1:PORT/t/demo/mcp

Uses `mcp.Client(url)` in its DEFAULT mode ("auto": probe `server/discover`, fall back to the
`initialize` handshake on a legacy answer) and checks that:
- the probe succeeded and the connection negotiated 2026-07-28 (no fallback to initialize);
- tools/list has the reference tools;
- `test_simple_text` returns its text;
- `test_elicitation` first answers with an `input_required` result carrying an
  elicitation/create input request and a requestState (observed through the session's
  `allow_input_required=True` escape hatch, without answering it);
- `Client.call_tool("test_elicitation")` drives the multi round-trip itself: the elicitation
  callback runs once, the client retries with inputResponses + requestState, and the final tool
  result reflects the accepted content.

Prints one "ok - ..."/"not ok - ..." line per check and finally "py-modern: N passed, M failed";
exits 1 on any failure. The whole run is bounded by INTEROP_TIMEOUT_SECS (default 60).
"""

from __future__ import annotations

import os
import sys

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.session import ClientRequestContext

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # py_common.py is beside this script
from py_common import Checks, describe, text_of  # noqa: E402

TIMEOUT_SECS = float(os.environ.get("INTEROP_TIMEOUT_SECS", "60"))
MODERN_VERSION = "2026-07-28"
SIMPLE_TEXT = "This is a simple text response for testing."
ELICIT_CONTENT = {"username": "pymodern", "email": "pymodern@example.com"}

checks = Checks()
check = checks.check
step = checks.step


async def run(url: str) -> None:
    elicitations: list[types.ElicitRequestParams] = []

    async def elicitation_callback(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        elicitations.append(params)
        return types.ElicitResult(action="accept", content=dict(ELICIT_CONTENT))

    # Default mode ("auto") on purpose: the check is that the SDK picks 2026-07-28 by itself.
    async with Client(
        url,
        read_timeout_seconds=15,
        elicitation_callback=elicitation_callback,
        client_info=types.Implementation(name="mcp-harbor-interop-py-modern", version="1.0.0"),
    ) as client:
        session = client.session
        check(
            f"auto mode negotiated {MODERN_VERSION} (got {client.protocol_version})",
            client.protocol_version == MODERN_VERSION,
        )
        check(
            "negotiated through server/discover, not the initialize handshake",
            session.discover_result is not None and session.initialize_result is None,
            f"discover_result={session.discover_result} initialize_result={session.initialize_result}",
        )
        if session.discover_result is not None:
            d = session.discover_result
            check(
                "discover result advertises tools and names the server",
                MODERN_VERSION in d.supported_versions
                and d.capabilities.tools is not None
                and client.server_info is not None
                and bool(client.server_info.name),
                d.model_dump(by_alias=True, exclude_none=True),
            )
        if client.protocol_version != MODERN_VERSION:
            return  # the rest would only test the legacy path, which py_client.py covers

        async def do_list_tools() -> None:
            names: list[str] = []
            cursor: str | None = None
            while True:
                page = await client.list_tools(cursor=cursor)
                names += [t.name for t in page.tools]
                cursor = page.next_cursor
                if not cursor:
                    break
            expected = ["test_simple_text", "test_elicitation"]
            missing = [n for n in expected if n not in names]
            check("tools/list has the reference tools", not missing, f"missing {missing}; got {names}")

        async def do_simple_text() -> None:
            r = await client.call_tool("test_simple_text", {})
            check("test_simple_text returns its text", not r.is_error and text_of(r) == SIMPLE_TEXT, r)

        async def do_input_required_shape() -> None:
            # One leg only, left unanswered: the server must not block waiting for the client.
            r = await session.call_tool("test_elicitation", {"message": "Who are you?"}, allow_input_required=True)
            ok = isinstance(r, types.InputRequiredResult)
            reqs = (r.input_requests or {}) if ok else {}
            elicit = [q for q in reqs.values() if isinstance(q, types.ElicitRequest)]
            check(
                "test_elicitation first answers input_required with an elicitation/create request",
                ok and len(elicit) == 1 and bool(r.request_state),
                r,
            )

        async def do_elicitation() -> None:
            r = await client.call_tool("test_elicitation", {"message": "Who are you?"})
            t = text_of(r)
            check(
                "elicitation callback ran once for the multi round-trip",
                len(elicitations) == 1,
                f"callbacks={len(elicitations)}",
            )
            if elicitations:
                p = elicitations[0]
                props = getattr(p, "requested_schema", None)
                props = props.get("properties", {}) if isinstance(props, dict) else getattr(props, "properties", {}) or {}
                check(
                    "elicitation request is a form asking for username and email",
                    isinstance(p, types.ElicitRequestFormParams) and {"username", "email"} <= set(props),
                    p,
                )
            check(
                "test_elicitation result reflects the accepted content",
                not r.is_error
                and "accept" in t
                and ELICIT_CONTENT["username"] in t
                and ELICIT_CONTENT["email"] in t,
                r,
            )

        await step("tools/list", do_list_tools)
        await step("test_simple_text", do_simple_text)
        await step("input_required shape", do_input_required_shape)
        await step("elicitation round trip", do_elicitation)


async def main(url: str) -> None:
    try:
        with anyio.fail_after(TIMEOUT_SECS):
            await run(url)
        closed_cleanly, detail = True, None
    except TimeoutError:
        closed_cleanly, detail = False, f"timed out after {TIMEOUT_SECS:.0f} s"
    except BaseException as exc:  # transport errors surface as (nested) exception groups
        if isinstance(exc, KeyboardInterrupt | SystemExit):
            raise
        closed_cleanly, detail = False, f"threw: {describe(exc)}"
    check("client ran and closed", closed_cleanly, detail)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: py_modern.py <mcp-url>   (e.g. http://127.0.0.1:8080/t/demo/mcp)", file=sys.stderr)
        sys.exit(2)
    try:
        anyio.run(main, sys.argv[1])
    except BaseException as exc:  # never leave without the summary line
        if isinstance(exc, KeyboardInterrupt):
            raise
        check("run", False, f"threw: {describe(exc)}")
    print(f"py-modern: {checks.passed} passed, {checks.failed} failed", flush=True)
    sys.exit(1 if checks.failed else 0)
