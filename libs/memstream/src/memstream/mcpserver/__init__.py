"""memstream as an MCP server: seven tools over the HTTP API, for stdio and streamable HTTP."""
