"""The arena: players from any worker (and language models, random and scripted play) in tournaments,
ranked with intervals (``mosaic arena``; docs/arena.md)."""
