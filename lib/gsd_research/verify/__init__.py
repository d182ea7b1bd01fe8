"""Citation checks of a research file: claims, their quotes, and whether the cited sources support them."""
