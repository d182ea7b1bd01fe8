"""Pydantic data models shared by every layer of the knowledge base."""

from __future__ import annotations

import uuid
from datetime import datetime

from pydantic import BaseModel, Field


class DocumentMetadata(BaseModel):
    """Metadata about an indexed document (one line of the state record)."""

    file_path: str
    file_name: str = ""  # unread here; an older plugin version sharing the home requires both
    file_type: str = ""
    checksum: str
    indexed_at: datetime
    fragment_count: int
    text_source: str = "text"  # text | ocr (read by tesseract) | none (no text found: see no_text)
    ocr_tried: bool = False  # a `none` PDF tesseract already read (not read again while unchanged)


class Fragment(BaseModel):
    """A chunk of a document: `text` is a contiguous slice of the document's text; `breadcrumb` the heading
    path where it starts (context, not part of the text)."""

    text: str
    document_path: str
    fragment_index: int
    breadcrumb: str = ""


class SearchResult(BaseModel):
    """One ranked fragment; `distance` is the cosine distance when the vector ranking saw it."""

    fragment_id: str
    text: str
    document_path: str
    fragment_index: int
    distance: float | None = None
    score: float = 0.0
    repository: str = ""
    match: str = "vector"  # vector | lexical | both
    breadcrumb: str = ""


class DocumentSearchResult(BaseModel):
    """Search results grouped by document, best fragments first."""

    document_path: str
    top_fragments: list[SearchResult]
    best_distance: float | None = None
    score: float = 0.0
    repository: str = ""


class ChunkResult(BaseModel):
    document_path: str
    fragments: list[Fragment]
    text_source: str = "text"


class IndexingResult(BaseModel):
    repository_name: str = ""
    documents_indexed: int = 0
    documents_skipped: int = 0
    documents_failed: int = 0
    documents_removed: int = 0
    documents_resumed: int = 0  # embedded by an interrupted run, taken from its spool (counted in indexed too)
    fragments_created: int = 0
    documents_ocr: int = 0  # of the indexed documents, read by OCR (tesseract) this run
    documents_no_text: int = 0  # documents of the repository with no text to index (see no_text)
    no_text: list[dict] = Field(default_factory=list)  # [{"document_path", "fix"}]: not indexed, and why
    skipped: list[dict] = Field(default_factory=list)  # [{"document_path", "reason"}]: not read (see REASONS)
    errors: list[str] = Field(default_factory=list)
    repaired: str | None = None  # a damaged store set aside and rebuilt by this run
    elapsed_seconds: float = 0.0


class IndexStats(BaseModel):
    repository_name: str
    total_documents: int
    total_fragments: int
    last_indexed: datetime | None
    path: str = ""
    store: str = "embedded"
    embedding_provider: str = "chromadb"
    embedding_precision: str | None = None  # the local model's: "int8", "fp32", "fp32+int8"; None: unknown
    documents_ocr: int = 0
    documents_no_text: int = 0
    no_text: list[str] = Field(default_factory=list)  # the first NO_TEXT_LISTED of them
    fix: str | None = None  # what makes the no_text documents readable
    damaged: str | None = None  # the index cannot be read: which file, why, and the command that rebuilds it
    changed: str | None = None  # documents added, edited or removed since the last index run, and the fix


class Head(BaseModel):
    """What the index claims, without the per-document lines."""

    repository_id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    generation: int = 0
    embedding: str | None = None
    chunking: int | None = None
    precisions: list[str] = Field(default_factory=list)
    fragments: int = 0
    in_flight: list[str] = Field(default_factory=list)  # documents a run was writing (its journal)
    vector_file: list[int] | None = None  # the embedded vector store's file as the last commit left it
    writes: str = ""  # token of research memory's last write
    covered: str = ""  # the token the last complete index run covered
    walked: float = 0.0  # when the last complete index run began its walk of the folder (epoch seconds)

    @property
    def writes_pending(self) -> bool:
        """Research memory wrote since the last complete index run: its keyword rows lead the vectors."""
        return bool(self.writes) and self.writes != self.covered
