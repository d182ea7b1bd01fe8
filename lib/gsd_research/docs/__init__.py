"""Library documentation through Context7: the REST client and the `docs` command."""
