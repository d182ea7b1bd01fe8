"""Research memory: what fetch, search and deep read, found again offline."""
