"""`researcher`: a local knowledge base (docling conversion, Chroma vectors, BM25, hybrid search)."""
