#!/usr/bin/env python3
"""A small MCP server built with the official Python SDK (PyPI `mcp` 2.x: `MCPServer`, the former
FastMCP), served over Streamable HTTP at http://127.0.0.1:PORT/mcp. The federation check
(tests/interop/federation_peers.sh) publishes it as an upstream of a tenant.

Usage:
    ~/.cache/mcp-harbor/pyenv/bin/python tests/interop/fastmcp_upstream.py PORT

Tools:
- `shout(text)`: the text upper-cased, with "!" (a plain call);
- `ask_llm(question)`: asks the client for a completion (`sampling/createMessage`, sent on the
  call's own stream) and returns "LLM said: <the client's text>";
- `whoami()`: asks the client for a name and an age (`elicitation/create`, form mode) and returns
  "Hello <name>, age <age>" (or the action taken when not accepted);
- `list_client_roots()`: asks the client for its roots (`roots/list`, on the call's stream) and
  returns their URIs;
- `secret_tool()`: a tool the federation check hides with a deny filter.
Prompts: `greeting(name)`, `secret_prompt` (hidden by the check).
Resources: `py://notes/readme` (text), `py://notes/secret` (hidden by the check).
"""

from __future__ import annotations

import sys
import warnings

import mcp_types as types
from pydantic import BaseModel, Field

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.context import Context
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.shared.message import ServerMessageMetadata

# Sampling and roots are deprecated by the 2026-07-28 revision; this server speaks the session-era
# revisions (the gateway negotiates 2025-11-25), where they are current.
warnings.simplefilter("ignore", MCPDeprecationWarning)

README_TEXT = "Notes from the python upstream: federation works."

server = MCPServer("python-upstream", version="1.0.0", log_level="WARNING")


@server.tool(description="Upper-cases the text and adds an exclamation mark")
def shout(text: str) -> str:
    return f"{text.upper()}!"


@server.tool(description="Asks the client's LLM a question (sampling/createMessage)")
async def ask_llm(question: str, ctx: Context) -> str:
    result = await ctx.session.create_message(
        [types.SamplingMessage(role="user", content=types.TextContent(type="text", text=question))],
        max_tokens=64,
        system_prompt="You are the federation test client.",
        related_request_id=ctx.request_context.request_id,
    )
    content = result.content
    text = content.text if isinstance(content, types.TextContent) else repr(content)
    return f"LLM said: {text} (model {result.model})"


class Identity(BaseModel):
    name: str = Field(description="Your name")
    age: int = Field(description="Your age")


@server.tool(description="Asks the user who they are (elicitation/create)")
async def whoami(ctx: Context) -> str:
    answer = await ctx.elicit("Who are you?", Identity)
    if answer.action == "accept":
        return f"Hello {answer.data.name}, age {answer.data.age}"
    return f"Elicitation {answer.action}"


@server.tool(description="Lists the client's roots (roots/list)")
async def list_client_roots(ctx: Context) -> str:
    result = await ctx.session.send_request(
        types.ListRootsRequest(),
        types.ListRootsResult,
        metadata=ServerMessageMetadata(related_request_id=ctx.request_context.request_id),
    )
    return "roots: " + ", ".join(str(r.uri) for r in result.roots)


@server.tool(description="A tool the gateway must hide")
def secret_tool() -> str:
    return "this must not be reachable through the gateway"


@server.prompt(description="Greets someone by name")
def greeting(name: str) -> str:
    return f"Please greet {name} warmly."


@server.prompt(description="A prompt the gateway must hide")
def secret_prompt() -> str:
    return "this must not be reachable through the gateway"


@server.resource("py://notes/readme", name="readme", mime_type="text/plain")
def readme() -> str:
    return README_TEXT


@server.resource("py://notes/secret", name="secret", mime_type="text/plain")
def secret() -> str:
    return "this must not be reachable through the gateway"


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: fastmcp_upstream.py PORT", file=sys.stderr)
        sys.exit(2)
    server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
