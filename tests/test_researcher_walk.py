"""researcher and hostile folders: symlink loops, dangling links, FIFOs and blank scans neither stop nor hang
an index run, nor does a file name that is not UTF-8; each is skipped and named with the reason, and an unchanged blank scan is not read again."""

from __future__ import annotations

import gc
import os
import shutil
import threading
from pathlib import Path

import pytest

from tests.researcher_fixtures import kb, make_repo, seed_model


@pytest.fixture
def model(home):
    return seed_model()


def _skipped(out: dict) -> dict[str, str]:
    return {s["document_path"]: s["reason"] for s in out["skipped"]}


def test_symlink_loops_and_dangling_links_are_skipped_with_their_reason(tmp_path, model):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("# Secret\n\nhunter2\n")
    root = make_repo(tmp_path / "repo", {"a.md": "# A\n\nThe axolotl regrows limbs.\n",
                                         "sub/b.md": "# B\n\nThe okapi is shy.\n"})
    (root / "loop1.md").symlink_to("loop2.md")
    (root / "loop2.md").symlink_to("loop1.md")
    (root / "sub" / "self.md").symlink_to("self.md")
    (root / "dangling.md").symlink_to("/nonexistent/x.md")
    (root / "leak.md").symlink_to(outside / "secret.md")
    (root / "up").symlink_to("..", target_is_directory=True)
    (root / "here").symlink_to(".", target_is_directory=True)  # inside: kept, not walked twice
    kb("repo", "add", "r", str(root), "--json")

    res = kb("index", "r", "--json")

    assert res.code == 0, res.stdout
    out = res.json["results"][0]
    assert out["documents_indexed"] == 2
    assert _skipped(out) == {"loop1.md": "loop", "loop2.md": "loop", "sub/self.md": "loop",
                             "dangling.md": "dangling", "leak.md": "outside", "up": "outside"}
    human = kb("index", "r")
    assert "loop1.md" in human.stdout and "symlink loop" in human.stdout
    assert kb("search", "axolotl", "--json").json["documents"][0]["document_path"] == "a.md"


def test_a_file_whose_name_is_not_utf8_is_skipped_and_named_while_the_others_are_indexed(tmp_path, model):
    root = make_repo(tmp_path / "repo", {"a.md": "# A\n\nThe axolotl regrows limbs.\n"})
    with open(os.path.join(os.fsencode(root), b"caf\xe9.md"), "w") as fh:  # Latin-1, as an old archive has it
        fh.write("# Cafe\n\nThe okapi is shy.\n")
    kb("repo", "add", "r", str(root), "--json")

    res = kb("index", "r", "--json")

    assert res.code == 0, res.stdout
    out = res.json["results"][0]
    assert out["documents_indexed"] == 1
    assert _skipped(out) == {"caf\ufffd.md": "not_utf8"}
    assert kb("search", "axolotl", "--json").json["documents"][0]["document_path"] == "a.md"


def test_a_fifo_in_the_repository_does_not_hang_the_index(tmp_path, model):
    root = make_repo(tmp_path / "repo", {"a.md": "# A\n\nThe axolotl regrows limbs.\n"})
    os.mkfifo(root / "pipe.md")
    kb("repo", "add", "r", str(root), "--json")
    box: dict = {}
    worker = threading.Thread(target=lambda: box.update(res=kb("index", "r", "--json")), daemon=True)

    worker.start()
    worker.join(120)

    if worker.is_alive():  # unblock the reader so the test process can end
        fd = os.open(root / "pipe.md", os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
        pytest.fail("index hangs on a FIFO")
    out = box["res"].json["results"][0]
    assert out["documents_indexed"] == 1
    assert _skipped(out) == {"pipe.md": "not_regular"}


def test_the_filesystem_gateway_never_opens_a_fifo(tmp_path):
    from gsd_research.researcher.gateways.filesystem_gateway import FilesystemGateway, NotIndexable

    root = make_repo(tmp_path / "repo", {"a.md": "alpha"})
    os.mkfifo(root / "p.md")
    fs = FilesystemGateway(root)
    for call in (lambda: fs.compute_checksum("p.md"), lambda: fs.absolute("p.md")):
        with pytest.raises(NotIndexable):
            call()
    assert not fs.includes("p.md", ["md"])
    assert list(fs.iter_files(["md"])) == ["a.md"]


def test_an_unchanged_blank_scan_is_no_text_and_not_read_again(tmp_path, model, monkeypatch):
    if not shutil.which("tesseract"):
        pytest.skip("the tesseract command is not installed (Debian: apt-get install tesseract-ocr)")
    from PIL import Image

    root = make_repo(tmp_path / "repo", {"a.md": "# A\n\nThe axolotl regrows limbs.\n"})
    Image.new("L", (850, 1100), 255).save(root / "blank.pdf", "PDF", resolution=100.0)
    kb("repo", "add", "s", str(root), "--json")
    first = kb("index", "s", "--json").json["results"][0]
    assert (first["documents_failed"], first["documents_no_text"]) == (0, 1), first
    calls = []
    import gsd_research.researcher.gateways.docling_gateway as ocr

    real = ocr.ocr_pdf
    monkeypatch.setattr(ocr, "ocr_pdf", lambda *a, **k: calls.append(a) or real(*a, **k))

    again = kb("index", "s", "--json").json["results"][0]

    assert (again["documents_failed"], again["errors"], again["documents_no_text"]) == (0, [], 1), again
    assert again["no_text"][0]["document_path"] == "blank.pdf"
    assert calls == []
    status = kb("status", "s", "--json").json["repositories"][0]
    assert (status["total_documents"], status["documents_no_text"], status["no_text"]) == (1, 1, ["blank.pdf"])


def test_a_damaged_keyword_index_is_named_and_rebuilt_by_index(tmp_path, model, home):
    root = make_repo(tmp_path / "repo", {"a.md": "# A\n\nThe axolotl regrows limbs.\n",
                                         "b.md": "# B\n\nThe okapi is shy.\n"})
    kb("repo", "add", "r", str(root), "--json")
    kb("index", "r", "--json")
    store = home / "repositories" / "r" / "lexical.sqlite"
    gc.collect()  # no connection of this process left open on it (SQLite shares one WAL index per process)
    for extra in ("-wal", "-shm"):
        Path(str(store) + extra).unlink(missing_ok=True)
    store.write_bytes(b"this is not a database at all" * 100)

    search = kb("search", "axolotl", "--json")
    assert search.json["error"]["code"] == "INDEX_DAMAGED", search.stdout
    assert str(store) in search.json["error"]["message"]
    assert "researcher index r" in search.json["error"]["suggestions"][0]
    status = kb("status", "r", "--json").json["repositories"][0]
    assert str(store) in status["damaged"] and "researcher index r" in status["damaged"]
    assert "damaged" in kb("status", "r").stdout

    out = kb("index", "r", "--json")

    assert out.code == 0, out.stdout
    result = out.json["results"][0]
    assert result["documents_indexed"] == 2 and "moved aside" in result["repaired"], result
    assert list(store.parent.glob("lexical.sqlite.damaged-*"))
    assert kb("search", "axolotl", "--json").json["documents"][0]["document_path"] == "a.md"
    assert kb("status", "r", "--json").json["repositories"][0]["damaged"] is None
