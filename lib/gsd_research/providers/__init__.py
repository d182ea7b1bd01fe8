"""Provider clients: each takes the shared HTTP client, a base URL and a key."""
