"""`agi --mcp-serve`: agi as an MCP tool for other agents (docs: mcp-server): `serve` the
server, `call` the tool's schemas and a call's limits, `job` the run behind one call."""
