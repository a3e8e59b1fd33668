#!/usr/bin/env python3
"""Federation interop check: drives a tenant whose catalog is two REAL outside upstream servers
(the official reference "everything" server under prefix `ev`, and the Python SDK server
tests/interop/fastmcp_upstream.py under prefix `py`) with the official Python SDK client
(PyPI `mcp` 2.x), through the gateway, twice: with `ClientSession` over `streamable_http_client`
(the initialize handshake, a session-era revision) and with the high-level `mcp.Client` in its
default mode (2026-07-28, where an upstream's requests come back as `input_required`). Set up by
tests/interop/federation_peers.sh, which hides `ev`'s get-env tool, resource-prompt prompt and
instructions.md resource, and `py`'s secret_* tools and prompts and py://notes/secret.

Usage:
    ~/.cache/mcp-harbor/pyenv/bin/python tests/interop/federation_py.py http://127.0.0.1:PORT/t/peers/mcp

The client declares sampling, elicitation and roots and answers them from its callbacks; the
checks: the lists show the ev_*/py_* entries and hide the denied ones, plain calls, sampling,
elicitation and roots requests made by each upstream during a call reach this client and its
answers reach the result, prompts/get, completion/complete and resources/read of listed entries
work, and the denied ones are refused.

Prints one "PASS - ..."/"FAIL - ..." line per check and finally "federation-py: N passed, M failed";
exits 1 on any failure. The whole run is bounded by INTEROP_TIMEOUT_SECS (default 120).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.session import ClientRequestContext, ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # py_common.py is beside this script
from py_common import Checks, describe, text_of  # noqa: E402

TIMEOUT_SECS = float(os.environ.get("INTEROP_TIMEOUT_SECS", "120"))
MODERN_VERSION = "2026-07-28"

SAMPLING_TEXT = "Federated sample from the python client: 42"
ROOT_URI = "file:///srv/federation-py"
EV_ELICIT = {"name": "Py Thon", "check": True, "email": "python@example.com", "integer": 7}
PY_ELICIT = {"name": "Py Thon", "age": 33}
EV_DENIED = "demo://resource/static/document/instructions.md"
EV_LISTED = "demo://resource/static/document/features.md"
PY_README = "Notes from the python upstream: federation works."


def short(v: Any) -> str:
    s = str(v)
    return s if len(s) <= 600 else s[:600] + "…"


checks = Checks(ok="PASS", not_ok="FAIL", detail=short)
check = checks.check
step = checks.step


def prompt_text(result: types.GetPromptResult) -> str:
    return "\n".join(m.content.text for m in result.messages if isinstance(m.content, types.TextContent))


async def refused(name: str, fn: Callable[[], Awaitable[Any]], codes: list[int]) -> None:
    """fn must be refused: a JSON-RPC error with one of `codes`, or (a tool) an isError result."""
    try:
        r = await fn()
    except MCPError as exc:
        check(name, exc.code in codes, f"code {exc.code}: {exc.message}")
        return
    except Exception as exc:
        check(name, False, f"threw: {describe(exc)}")
        return
    check(name, bool(getattr(r, "is_error", False)), f"not refused: {r}")


class Seen:
    def __init__(self) -> None:
        self.sampling: list[types.CreateMessageRequestParams] = []
        self.elicit: list[types.ElicitRequestParams] = []
        self.roots = 0


class Peer:
    """The calls of the flow, over either client: `ClientSession` after the initialize handshake
    (a session-era revision: the upstreams' requests reach the callbacks on the call's stream), or
    the high-level `mcp.Client` at 2026-07-28 (they come back as `input_required` results that the
    client answers from the same callbacks and retries)."""

    def __init__(self, api: ClientSession | Client) -> None:
        self.api = api

    async def _list(self, method: str, key: str) -> list[Any]:
        items: list[Any] = []
        cursor: str | None = None
        while True:
            if isinstance(self.api, Client):
                page = await getattr(self.api, method)(cursor=cursor)
            else:
                page = await getattr(self.api, method)(
                    params=types.PaginatedRequestParams(cursor=cursor) if cursor else None
                )
            items += getattr(page, key)
            cursor = page.next_cursor
            if not cursor:
                return items

    async def tool_names(self) -> list[str]:
        return [t.name for t in await self._list("list_tools", "tools")]

    async def prompt_names(self) -> list[str]:
        return [p.name for p in await self._list("list_prompts", "prompts")]

    async def resource_uris(self) -> list[str]:
        return [str(r.uri) for r in await self._list("list_resources", "resources")]

    async def call_tool(self, name: str, args: dict[str, Any]) -> types.CallToolResult:
        return await self.api.call_tool(name, args)

    async def get_prompt(self, name: str, args: dict[str, str]) -> types.GetPromptResult:
        return await self.api.get_prompt(name, args)

    async def read_resource(self, uri: str) -> types.ReadResourceResult:
        return await self.api.read_resource(uri)

    async def complete(self, ref: types.PromptReference, argument: dict[str, str], context: dict[str, str]) -> types.CompleteResult:
        return await self.api.complete(ref, argument, context_arguments=context)


def callbacks(seen: Seen) -> dict[str, Any]:
    async def sampling_callback(
        context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.ErrorData:
        seen.sampling.append(params)
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=SAMPLING_TEXT),
            model="federation-test-model",
            stop_reason="endTurn",
        )

    async def elicitation_callback(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        seen.elicit.append(params)
        props = (getattr(params, "requested_schema", None) or {}).get("properties", {})
        return types.ElicitResult(action="accept", content=dict(PY_ELICIT if "age" in props else EV_ELICIT))

    async def list_roots_callback(context: ClientRequestContext) -> types.ListRootsResult | types.ErrorData:
        seen.roots += 1
        return types.ListRootsResult(roots=[types.Root(uri=ROOT_URI, name="federation")])

    return {
        "sampling_callback": sampling_callback,
        "elicitation_callback": elicitation_callback,
        "list_roots_callback": list_roots_callback,
        "client_info": types.Implementation(name="mcp-harbor-federation-py", version="1.0.0"),
    }


async def run_flow(label: str, peer: Peer, seen: Seen) -> None:
    # "Resource not found" is -32002 in the session-era revisions, Invalid Params from 2026-07-28 on.
    not_found = -32602 if label >= MODERN_VERSION else -32002

    def name(n: str) -> str:
        return f"{label}: {n}"

    # ---- tools ----
    async def do_list_tools() -> None:
        names = await peer.tool_names()
        expected = ["ev_echo", "ev_get-sum", "ev_trigger-sampling-request", "ev_trigger-elicitation-request",
                    "py_shout", "py_ask_llm", "py_whoami", "py_list_client_roots"]
        missing = [n for n in expected if n not in names]
        check(name("tools/list has the ev_* and py_* tools"), not missing, f"missing {missing}; got {names}")
        hidden = [n for n in ["ev_get-env", "get-env", "py_secret_tool", "secret_tool"] if n in names]
        check(name("tools/list hides the denied tools (ev get-env, py secret_tool)"), not hidden, f"listed: {hidden}")
        unprefixed = [n for n in names if not n.startswith(("ev_", "py_"))]
        check(name("every tool is prefixed ev_ or py_"), not unprefixed, f"unprefixed: {unprefixed}")

    async def do_echo() -> None:
        r = await peer.call_tool("ev_echo", {"message": "hello from python"})
        check(name('ev_echo returns "Echo: hello from python"'),
              not r.is_error and text_of(r) == "Echo: hello from python", r)

    async def do_shout() -> None:
        r = await peer.call_tool("py_shout", {"text": "federated"})
        check(name('py_shout returns "FEDERATED!"'), not r.is_error and text_of(r) == "FEDERATED!", r)

    await step(name("tools/list"), do_list_tools)
    await step(name("ev_echo"), do_echo)
    await step(name("py_shout"), do_shout)
    await refused(name("calling the denied ev_get-env is refused"),
                  lambda: peer.call_tool("ev_get-env", {}), [-32602])
    await refused(name("calling the denied py_secret_tool is refused"),
                  lambda: peer.call_tool("py_secret_tool", {}), [-32602])

    # ---- server -> client requests during a call ----
    async def do_ev_sampling() -> None:
        before = len(seen.sampling)
        r = await peer.call_tool("ev_trigger-sampling-request", {"prompt": "What is six times seven?", "maxTokens": 50})
        req = seen.sampling[before] if len(seen.sampling) > before else None
        first = req.messages[0].content if req and req.messages else None
        check(
            name("ev_trigger-sampling-request: sampling/createMessage reached the client with the upstream's params"),
            len(seen.sampling) == before + 1
            and isinstance(first, types.TextContent)
            and "What is six times seven?" in first.text
            and req.max_tokens == 50,
            f"requests={len(seen.sampling) - before} params={req}",
        )
        check(name("ev_trigger-sampling-request: the client's answer is in the result"),
              not r.is_error and SAMPLING_TEXT in text_of(r) and "federation-test-model" in text_of(r), r)

    async def do_py_sampling() -> None:
        before = len(seen.sampling)
        r = await peer.call_tool("py_ask_llm", {"question": "What is the answer?"})
        req = seen.sampling[before] if len(seen.sampling) > before else None
        first = req.messages[0].content if req and req.messages else None
        check(
            name("py_ask_llm: sampling/createMessage reached the client with the upstream's params"),
            len(seen.sampling) == before + 1
            and isinstance(first, types.TextContent)
            and first.text == "What is the answer?"
            and req.max_tokens == 64,
            f"requests={len(seen.sampling) - before} params={req}",
        )
        check(name("py_ask_llm: the client's answer is in the result"),
              not r.is_error and text_of(r) == f"LLM said: {SAMPLING_TEXT} (model federation-test-model)", r)

    async def do_ev_elicit() -> None:
        before = len(seen.elicit)
        r = await peer.call_tool("ev_trigger-elicitation-request", {})
        req = seen.elicit[before] if len(seen.elicit) > before else None
        check(name("ev_trigger-elicitation-request: elicitation/create reached the client"),
              len(seen.elicit) == before + 1
              and "name" in (getattr(req, "requested_schema", None) or {}).get("required", []),
              f"requests={len(seen.elicit) - before} params={req}")
        t = text_of(r)
        check(name("ev_trigger-elicitation-request: the client's answer is in the result"),
              not r.is_error and f"Name: {EV_ELICIT['name']}" in t and f"Email: {EV_ELICIT['email']}" in t, r)

    async def do_py_elicit() -> None:
        before = len(seen.elicit)
        r = await peer.call_tool("py_whoami", {})
        req = seen.elicit[before] if len(seen.elicit) > before else None
        check(name("py_whoami: elicitation/create reached the client"),
              len(seen.elicit) == before + 1 and getattr(req, "message", None) == "Who are you?",
              f"requests={len(seen.elicit) - before} params={req}")
        check(name("py_whoami: the client's answer is in the result"),
              not r.is_error and text_of(r) == f"Hello {PY_ELICIT['name']}, age {PY_ELICIT['age']}", r)

    async def do_py_roots() -> None:
        before = seen.roots
        r = await peer.call_tool("py_list_client_roots", {})
        check(name("py_list_client_roots: roots/list reached the client and its roots are in the result"),
              seen.roots == before + 1 and not r.is_error and text_of(r) == f"roots: {ROOT_URI}",
              f"requests={seen.roots - before} result={r}")

    await step(name("ev sampling"), do_ev_sampling)
    await step(name("py sampling"), do_py_sampling)
    await step(name("ev elicitation"), do_ev_elicit)
    await step(name("py elicitation"), do_py_elicit)
    await step(name("py roots"), do_py_roots)

    # ---- prompts ----
    async def do_list_prompts() -> None:
        names = await peer.prompt_names()
        missing = [n for n in ["ev_simple-prompt", "ev_args-prompt", "py_greeting"] if n not in names]
        check(name("prompts/list has the ev_* and py_* prompts"), not missing, f"missing {missing}; got {names}")
        hidden = [n for n in ["ev_resource-prompt", "py_secret_prompt"] if n in names]
        check(name("prompts/list hides the denied prompts (ev resource-prompt, py secret_prompt)"),
              not hidden, f"listed: {hidden}")

    async def do_get_prompts() -> None:
        r = await peer.get_prompt("ev_args-prompt", {"city": "Lisbon", "state": "Portugal"})
        check(name("prompts/get ev_args-prompt"), prompt_text(r) == "What's weather in Lisbon, Portugal?", r)
        p = await peer.get_prompt("py_greeting", {"name": "Ada"})
        check(name("prompts/get py_greeting"), prompt_text(p) == "Please greet Ada warmly.", p)

    async def do_complete() -> None:
        r = await peer.complete(
            types.PromptReference(type="ref/prompt", name="ev_completable-prompt"),
            {"name": "name", "value": ""},
            {"department": "Support"},
        )
        check(name("completion/complete of ev_completable-prompt (context-aware)"),
              r.completion.values == ["John", "Kim", "Lee"], r)

    await step(name("prompts/list"), do_list_prompts)
    await step(name("prompts/get"), do_get_prompts)
    await refused(name("prompts/get of the denied ev_resource-prompt is refused"),
                  lambda: peer.get_prompt("ev_resource-prompt", {"resourceType": "Text", "resourceId": "1"}),
                  [-32602])
    await step(name("completion/complete"), do_complete)

    # ---- resources ----
    async def do_list_resources() -> None:
        uris = await peer.resource_uris()
        missing = [u for u in [EV_LISTED, "py://notes/readme"] if u not in uris]
        check(name("resources/list has the ev and py resources"), not missing, f"missing {missing}; got {uris}")
        hidden = [u for u in [EV_DENIED, "py://notes/secret"] if u in uris]
        check(name("resources/list hides the denied resources"), not hidden, f"listed: {hidden}")

    async def do_read() -> None:
        r = await peer.read_resource(EV_LISTED)
        c = r.contents[0] if r.contents else None
        check(name(f"resources/read {EV_LISTED}"),
              isinstance(c, types.TextResourceContents) and str(c.uri) == EV_LISTED
              and "# Everything Server - Features" in c.text, r)
        p = await peer.read_resource("py://notes/readme")
        pc = p.contents[0] if p.contents else None
        check(name("resources/read py://notes/readme"),
              isinstance(pc, types.TextResourceContents) and str(pc.uri) == "py://notes/readme"
              and pc.text == PY_README, p)

    await step(name("resources/list"), do_list_resources)
    await step(name("resources/read"), do_read)
    await refused(name(f"resources/read of the denied {EV_DENIED} fails ({not_found})"),
                  lambda: peer.read_resource(EV_DENIED), [not_found])
    await refused(name(f"resources/read of the denied py://notes/secret fails ({not_found})"),
                  lambda: peer.read_resource("py://notes/secret"), [not_found])


async def run_session_era(url: str) -> None:
    """`ClientSession` with the initialize handshake: a session-era revision (2025-11-25)."""
    seen = Seen()
    async with streamable_http_client(url) as (read, write):
        async with ClientSession(read, write, read_timeout_seconds=30, **callbacks(seen)) as session:
            init = await session.initialize()
            label = init.protocol_version
            caps = init.capabilities
            check(
                f"{label}: initialize (ClientSession; tools, prompts, resources served)",
                caps.tools is not None and caps.prompts is not None and caps.resources is not None,
                init.model_dump(by_alias=True, exclude_none=True),
            )
            await run_flow(label, Peer(session), seen)


async def run_modern(url: str) -> None:
    """`mcp.Client` in its default (auto) mode: 2026-07-28, where the upstreams' requests come back
    to the client as `input_required` results."""
    seen = Seen()
    async with Client(url, read_timeout_seconds=30, **callbacks(seen)) as client:
        label = client.protocol_version or "auto"
        check(f"{label}: connected (mcp.Client, auto mode) at {MODERN_VERSION}",
              client.protocol_version == MODERN_VERSION, client.protocol_version)
        await run_flow(label, Peer(client), seen)


async def run_bounded(label: str, fn: Callable[[str], Awaitable[None]], url: str, secs: float) -> None:
    try:
        with anyio.fail_after(secs):
            await fn(url)
        check(f"{label}: ran and closed", True)
    except TimeoutError:
        check(f"{label}: ran and closed", False, f"timed out after {secs:.0f} s")
    except Exception as exc:  # transport errors surface as (nested) exception groups
        check(f"{label}: ran and closed", False, f"threw: {describe(exc)}")


async def main(url: str) -> None:
    # Each client bounded on its own, so one that hangs still lets the other report.
    await run_bounded("session-era client", run_session_era, url, TIMEOUT_SECS / 2 - 1)
    await run_bounded("2026-07-28 client", run_modern, url, TIMEOUT_SECS / 2 - 1)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: federation_py.py <mcp-url>   (e.g. http://127.0.0.1:8080/t/peers/mcp)", file=sys.stderr)
        sys.exit(2)
    try:
        anyio.run(main, sys.argv[1])
    except BaseException as exc:  # never leave without the summary line
        if isinstance(exc, KeyboardInterrupt):
            raise
        check("run", False, f"threw: {describe(exc)}")
    print(f"federation-py: {checks.passed} passed, {checks.failed} failed", flush=True)
    sys.exit(1 if checks.failed else 0)
