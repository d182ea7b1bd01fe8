"""researcher and PDFs without a text layer: OCR with the `tesseract` command when it is on PATH, otherwise the
document is reported as `no_text` with the fix (index answer and status), never counted as indexed."""

from __future__ import annotations

import shutil

import pytest

from tests.researcher_fixtures import kb, make_repo, scanned_pdf, seed_model


@pytest.fixture
def model(home):
    return seed_model()


@pytest.fixture
def no_tesseract(tmp_path, monkeypatch):
    """PATH without the tesseract command (a machine where tesseract-ocr is not installed)."""
    bare = tmp_path / "bare-bin"
    bare.mkdir()
    monkeypatch.setenv("PATH", str(bare))
    return bare


def test_a_pdf_without_text_is_reported_no_text_with_the_fix(tmp_path, model, no_tesseract):
    root = make_repo(tmp_path / "repo", {"a.md": "# A\n\nThe axolotl regrows limbs.\n"})
    scanned_pdf(root / "scan.pdf")
    kb("repo", "add", "s", str(root), "--json")

    out = kb("index", "s", "--json").json["results"][0]

    assert out["documents_indexed"] == 1
    assert out["documents_no_text"] == 1
    assert out["no_text"][0]["document_path"] == "scan.pdf"
    assert "tesseract" in out["no_text"][0]["fix"]
    status = kb("status", "s", "--json").json["repositories"][0]
    assert status["documents_no_text"] == 1 and status["no_text"] == ["scan.pdf"]
    assert "tesseract" in status["fix"]
    assert status["total_documents"] == 1
    human = kb("index", "s")
    assert "scan.pdf" in human.stdout and "tesseract" in human.stdout  # still named, though unchanged


def test_a_scanned_pdf_is_read_by_tesseract(tmp_path, model, monkeypatch):
    """Recorded as no_text while tesseract is missing, read once it is there; a blank page stays no_text."""
    if not shutil.which("tesseract"):
        pytest.skip("the tesseract command is not installed (Debian: apt-get install tesseract-ocr)")
    from PIL import Image

    root = make_repo(tmp_path / "repo", {"a.md": "# A\n\nThe axolotl regrows limbs.\n"})
    scanned_pdf(root / "scan.pdf")
    Image.new("L", (850, 1100), 255).save(root / "blank.pdf", "PDF", resolution=100.0)
    kb("repo", "add", "s", str(root), "--json")
    path = __import__("os").environ["PATH"]
    monkeypatch.setenv("PATH", str(tmp_path))  # first without tesseract: recorded as no_text ...
    assert kb("index", "s", "--json").json["results"][0]["documents_no_text"] == 2
    monkeypatch.setenv("PATH", path)

    out = kb("index", "s", "--json").json["results"][0]  # ... then read once tesseract is there

    assert (out["documents_indexed"], out["documents_ocr"], out["documents_failed"]) == (1, 1, 0), out
    assert [d["document_path"] for d in out["no_text"]] == ["blank.pdf"]
    answer = kb("search", "quokka ledger invoice 7731", "--json").json
    assert answer["documents"][0]["document_path"] == "scan.pdf"
    text = answer["documents"][0]["top_fragments"][0]["text"]
    assert "quokka" in text.lower() and "7731" in text
    status = kb("status", "s", "--json").json["repositories"][0]
    assert (status["total_documents"], status["documents_no_text"], status["documents_ocr"]) == (2, 1, 1)
    assert kb("index", "s", "--json").json["results"][0]["documents_failed"] == 0
