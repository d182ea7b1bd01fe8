"""Research memory and citation checks: what fetch, search and deep read, found again offline; claims checked against their sources."""
