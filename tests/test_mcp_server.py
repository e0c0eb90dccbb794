"""Our tools served over MCP: listed exactly, answered through the registry's own checks."""

from __future__ import annotations

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from primer.loop.messages import tool_use_block
from primer.loop.tools import ToolRegistry, tool
from primer.providers.mcp_server import mcp_server
from primer.scenarios.orders import make_tools


@tool(side_effecting=True)
def send_receipt(order_id: str) -> str:
    """Email the receipt of an order.

    Args:
        order_id: the order's id.
    """
    return f"sent {order_id}"


def talk(server, fn):
    """Run ``fn(client)`` against ``server`` over the SDK's own client (legacy handshake,
    JSON-RPC over memory streams, as a stdio or HTTP client would see it); an ``MCPError``
    is returned rather than raised."""
    async def main():
        async with Client(server, mode="legacy") as client:
            try:
                return await fn(client)
            except MCPError as e:
                return e
    return anyio.run(main)


def test_each_tool_is_listed_with_its_own_definition_and_a_read_only_hint():
    tools = [*make_tools(), send_receipt]
    listed = talk(mcp_server(tools, name="orders"), lambda c: c.list_tools())
    assert [{"name": t.name, "description": t.description, "input_schema": t.input_schema}
            for t in listed.tools] == [t.definition() for t in tools]
    assert [t.annotations.read_only_hint for t in listed.tools] == [True, True, False]


def test_bad_input_is_an_error_result_with_the_text_a_local_run_sends():
    server = mcp_server(make_tools(), name="orders")
    result = talk(server, lambda c: c.call_tool("get_order", {"id": "A123"}))
    local = ToolRegistry(make_tools()).run(tool_use_block("t1", "get_order", {"id": "A123"}))
    assert result.is_error
    assert result.content[0].text == local.content


def test_a_tool_error_is_an_error_result_and_a_success_is_the_tools_text():
    server = mcp_server(make_tools(), name="orders")

    async def both(client):
        return (await client.call_tool("get_order", {"order_id": "Q000"}),
                await client.call_tool("calculator", {"expression": "2500 * 2 * 1.18"}))

    missing, total = talk(server, both)
    assert missing.is_error and missing.content[0].text.startswith("No order with id 'Q000'")
    assert (total.is_error, total.content[0].text) == (False, "5900.0")


def test_a_name_the_server_does_not_have_is_a_protocol_error_invalid_params():
    server = mcp_server(make_tools(), name="orders")
    error = talk(server, lambda c: c.call_tool("get_orders", {}))
    assert isinstance(error, MCPError)
    assert error.code == types.INVALID_PARAMS
    assert "Did you mean 'get_order'?" in error.message


def test_a_fault_must_name_a_served_tool_and_a_known_kind():
    with pytest.raises(ValueError, match="fault on 'refund', which is not one of the served "
                                         "tools \\(get_order, calculator\\)"):
        mcp_server(make_tools(), name="orders", faults={"refund": "hang"})
    with pytest.raises(ValueError, match="unknown fault 'slow' for 'get_order'"):
        mcp_server(make_tools(), name="orders", faults={"get_order": "slow"})
