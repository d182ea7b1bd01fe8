"""Reading without flooding the context: fetching, main-content extraction and fetch/summarize/analyze/image/web."""
