"""memstream as an MCP server: nine tools over the HTTP API, for stdio and streamable HTTP."""
