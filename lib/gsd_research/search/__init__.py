"""Web search: Tavily, the keyless ddgs fallback, cited Markdown reports and the `search` command."""
