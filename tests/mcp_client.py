"""A real MCP client for tests/mcp.rs: the official Python SDK (PyPI `mcp`), not code of ours.

Connects to `vllm-diag mcp` over stdio (it starts the server) or streamable HTTP (a server the
test started), initializes, lists the tools and makes the calls it is given, then prints one JSON
document on stdout: what the server said about itself, the tools, and each call's result as the
SDK parsed it (or the protocol error the SDK raised).

    python mcp_client.py --calls '[{"tool": "explain", "arguments": {...}}]' stdio BINARY ARGS...
    python mcp_client.py --calls '[...]' [--token TOKEN] http URL
"""

import argparse
import asyncio
import json
import sys
import time

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


def dump(model):
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


async def session_work(read, write, calls):
    out = {}
    async with ClientSession(read, write) as session:
        init = await session.initialize()
        out["initialize"] = dump(init)
        tools = await session.list_tools()
        out["tools"] = [dump(t) for t in tools.tools]
        out["calls"] = []
        for call in calls:
            started = time.monotonic()
            try:
                result = await session.call_tool(call["tool"], call.get("arguments"), read_timeout_seconds=120)
                entry = {"tool": call["tool"], "result": dump(result)}
            except Exception as e:  # the SDK raises on a JSON-RPC error
                entry = {"tool": call["tool"], "protocol_error": f"{type(e).__name__}: {e}"}
            entry["seconds"] = round(time.monotonic() - started, 3)
            out["calls"].append(entry)
    return out


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", default="[]")
    parser.add_argument("--token")
    parser.add_argument("transport", choices=["stdio", "http"])
    parser.add_argument("target", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    calls = json.loads(args.calls)
    if args.transport == "stdio":
        params = StdioServerParameters(command=args.target[0], args=args.target[1:])
        async with stdio_client(params) as (read, write):
            out = await session_work(read, write, calls)
    else:
        headers = {"Authorization": f"Bearer {args.token}"} if args.token else None
        async with create_mcp_http_client(headers=headers) as http:
            async with streamable_http_client(args.target[0], http_client=http) as (read, write):
                out = await session_work(read, write, calls)
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    asyncio.run(main())
