"""The MCP server examples/mcp_tools.py starts: a shop's order desk, written with the
official MCP SDK (``pip install 'aniki-sdk[mcp]'``), spoken to over stdin and stdout.

Run it yourself with ``python examples/_mcp_server.py``, or point any MCP client at it.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

ORDERS = {
    "A-1009": {"status": "shipped", "carrier": "PostNord", "eta": "Thursday"},
    "A-1010": {"status": "packing", "carrier": None, "eta": "next week"},
}

shop = MCPServer("shop", log_level="WARNING")


@shop.tool()
def order_status(order_id: str) -> str:
    """Where an order is.

    Args:
        order_id: The order number, such as A-1009.
    """
    order = ORDERS.get(order_id.strip().upper())
    if order is None:
        raise ToolError(f"there is no order {order_id}")
    carrier = f" with {order['carrier']}" if order["carrier"] else ""
    return f"Order {order_id}: {order['status']}{carrier}, arriving {order['eta']}."


@shop.tool()
def return_policy() -> str:
    """The shop's rules for returns."""
    return "Returns are free within 30 days; the item must be unused."


if __name__ == "__main__":
    shop.run()
