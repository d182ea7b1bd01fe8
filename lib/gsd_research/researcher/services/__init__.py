"""Services: the business logic of repositories, indexing and search, wired by the service factory."""
