"""Knowledge-base indexing benchmark: throughput cold/warm, incremental edits, embedding speed, peak RSS.

Usage: python bench/kb_indexing.py [--part fastapi|mixed|embed|quality|memory|memory-phases|chroma-memory|all]
       [--pairs N] [--rounds N]
Work files go to $KB_BENCH_DIR (default /tmp/gsd-kb-bench); nothing is written into the repository.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("GSD_SHARED_DIR", ROOT.parent / "shared"))
WORK = Path(os.environ.get("KB_BENCH_DIR", "/tmp/gsd-kb-bench"))
BIN = Path(sys.executable).parent
SCIFACT = SHARED / "bench" / "scifact"


def bench_env(name: str) -> dict:
    """A private GSD_RESEARCH_HOME per scenario and a HOME with Chroma's model seeded (offline)."""
    user_home = WORK / "userhome"
    user_home.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, HOME=str(user_home), GSD_RESEARCH_HOME=str(WORK / f"home-{name}"))
    subprocess.run(["bash", str(SHARED / "tools" / "seed-offline-models.sh")], env=env, check=True,
                   capture_output=True)
    return env


def researcher(env: dict, *args: str) -> tuple[dict, float, int]:
    """Run `researcher ARGS --json` as a fresh process: (answer, wall seconds, its own peak RSS in KiB)."""
    started = time.perf_counter()
    proc = subprocess.Popen([str(BIN / "researcher"), *args, "--json"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - started
    try:
        doc = json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise SystemExit(f"researcher {' '.join(args)} failed with status {proc.returncode}") from None
    return doc, wall, usage.ru_maxrss


def prepare_scifact(limit: int | None = None) -> Path:
    """SciFact abstracts as Markdown files (title heading + abstract) under the work dir, never the repo."""
    name = f"scifact-{limit or 'all'}"
    folder = WORK / name
    marker = folder / ".complete"
    if marker.exists():
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    with gzip.open(SCIFACT / "corpus.jsonl.gz", "rt", encoding="utf-8") as fh:
        for n, line in enumerate(fh):
            if limit and n >= limit:
                break
            doc = json.loads(line)
            (folder / f"{doc['_id']}.md").write_text(f"# {doc['title']}\n\n{doc['text']}\n", encoding="utf-8")
    marker.write_text("ok")
    return folder


def index_figures(doc: dict, wall: float) -> dict:
    r = doc["results"][0]
    secs = r["elapsed_seconds"]
    return {"documents": r["documents_indexed"], "fragments": r["fragments_created"], "failed": r["documents_failed"],
            "skipped": r["documents_skipped"], "removed": r["documents_removed"], "pipeline_s": secs,
            "process_s": round(wall, 2), "docs_per_s": round(r["documents_indexed"] / secs, 2) if secs else None,
            "fragments_per_s": round(r["fragments_created"] / secs, 2) if secs else None}


def snapshot(env: dict, repo: str) -> dict[str, tuple]:
    db = Path(env["GSD_RESEARCH_HOME"]) / "repositories" / repo / "lexical.sqlite"
    conn = sqlite3.connect(db)
    rows = conn.execute("SELECT document_path, fragment_index, text FROM fragments ORDER BY 1, 2").fetchall()
    conn.close()
    out: dict[str, list] = {}
    for path, _, text in rows:
        out.setdefault(path, []).append(text)
    return {k: tuple(v) for k, v in out.items()}


def corpus_run(name: str, source: Path, incremental: bool) -> dict:
    env = bench_env(name)
    shutil.rmtree(env["GSD_RESEARCH_HOME"], ignore_errors=True)
    folder = WORK / f"{name}-copy"
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(source, folder)
    researcher(env, "repo", "add", name, str(folder))
    cold_doc, cold_wall, _ = researcher(env, "index", name)
    warm_doc, warm_wall, _ = researcher(env, "index", name)
    out = {"cold": index_figures(cold_doc, cold_wall), "warm": index_figures(warm_doc, warm_wall)}
    out["warm_over_cold_pipeline"] = round(out["warm"]["pipeline_s"] / out["cold"]["pipeline_s"], 4)
    out["warm_over_cold_process"] = round(warm_wall / cold_wall, 4)
    if incremental:
        out["incremental"] = incremental_run(env, name, folder)
    return out


def incremental_run(env: dict, name: str, folder: Path) -> dict:
    before = snapshot(env, name)
    files = sorted(p for p in folder.rglob("*.md"))
    edited, deleted = files[10:15], files[20:25]
    for p in edited:
        p.write_text(p.read_text(encoding="utf-8") + "\n\nEdited paragraph for the incremental benchmark.\n")
    for p in deleted:
        p.unlink()
    added = []
    for i, src in enumerate(files[30:35]):
        dst = folder / f"added-{i}.md"
        dst.write_text("# Added page\n\n" + src.read_text(encoding="utf-8"), encoding="utf-8")
        added.append(dst)
    doc, wall, _ = researcher(env, "index", name)
    after = snapshot(env, name)
    rel = {p.relative_to(folder).as_posix() for p in edited + deleted + added}
    changed = {k for k in set(before) | set(after) if before.get(k) != after.get(k)}
    figures = index_figures(doc, wall)
    return {**figures, "expected_changed": len(rel), "changed_in_index": len(changed),
            "exactly_those": changed == rel}


EMBED_WORKER = """
import json, sys, time
import numpy as np
system, texts_file, out_file = sys.argv[1:4]
texts = json.load(open(texts_file))
if system == "chroma":
    from chromadb.utils.embedding_functions import ONNXMiniLM_L6_V2
    fn = ONNXMiniLM_L6_V2()
else:
    from gsd_research.researcher.gateways.embedding_gateway import DefaultEmbedder
    embedder = DefaultEmbedder()
    fn = embedder.embed
fn(texts[:4])
t0, c0 = time.perf_counter(), time.process_time()
vectors = np.array(fn(texts), dtype=np.float64)
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
np.save(out_file, vectors)
print(json.dumps({"wall": wall, "cpu": cpu, "precision": getattr(fn, "__self__", None) and embedder.precision}))
"""


def _compare(env: dict, texts: list[str], rounds: int) -> dict:
    """Each system in its own fresh process (no thread pools of one system beside another's), model loaded
    and warmed up before the clock starts; the processes of a round run one after the other, the order
    rotating, so all see the same machine load. Median and per-round ratios of wall time, CPU time, and the
    cosine of each system's vectors to Chroma's."""
    import statistics
    import tempfile

    import numpy as np

    systems = {"chroma": {}, "ours_fp32": {"GSD_RESEARCH_EMBEDDING_PRECISION": "fp32"},
               "ours_int8": {"GSD_RESEARCH_EMBEDDING_PRECISION": "int8"}}
    names = list(systems)
    seconds: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}
    vectors = {}
    with tempfile.TemporaryDirectory() as tmp:
        texts_file = Path(tmp) / "texts.json"
        texts_file.write_text(json.dumps(texts))
        for r in range(rounds):
            for name in names[r % len(names):] + names[:r % len(names)]:
                out = Path(tmp) / f"{name}.npy"
                proc = subprocess.run([sys.executable, "-c", EMBED_WORKER, name, str(texts_file), str(out)],
                                      env={**env, **systems[name]}, capture_output=True, text=True, check=True)
                result = json.loads(proc.stdout.strip().splitlines()[-1])
                assert name == "chroma" or result["precision"] == name.split("_")[1], result
                seconds[name].append(result["wall"])
                cpu[name].append(result["cpu"])
                vectors[name] = np.load(out)
    base, base_cpu = statistics.median(seconds["chroma"]), statistics.median(cpu["chroma"])
    result = {"texts": len(texts), "rounds": rounds}
    for name in names:
        med = statistics.median(seconds[name])
        cos = (vectors[name] * vectors["chroma"]).sum(1)
        result[name] = {"texts_per_s": round(len(texts) / med, 2),
                        "speedup_vs_chroma": round(base / med, 2),
                        "speedup_per_round": [round(c / o, 2) for c, o in zip(seconds["chroma"], seconds[name],
                                                                              strict=True)],
                        "cpu_ms_per_text": round(1000 * statistics.median(cpu[name]) / len(texts), 1),
                        "cpu_speedup_vs_chroma": round(base_cpu / statistics.median(cpu[name]), 2),
                        "cosine_to_chroma_min": round(float(cos.min()), 4),
                        "cosine_to_chroma_mean": round(float(cos.mean()), 4)}
    return result


def embed_run(n: int = 128, rounds: int = 5) -> dict:
    """Chroma's own ONNXMiniLM_L6_V2 (pads every text to 256 tokens, batches of 32) vs our document embedder
    with the same float model (length-sorted batches of 8, dynamic padding) and with its int8 build (the
    default for documents), on the same texts: fastapi-docs fragments (long, near the 256-token cap) and
    SciFact queries (short)."""
    env = bench_env("embed")
    os.environ.update(HOME=env["HOME"], GSD_RESEARCH_HOME=env["GSD_RESEARCH_HOME"])
    from gsd_research.researcher.chunking import chunk_text
    from gsd_research.researcher.gateways.embedding_gateway import DefaultEmbedder

    counter = DefaultEmbedder()
    counter.embed(["builds the int8 model before any clock starts"])
    texts: list[str] = []
    for p in sorted((SHARED / "bench" / "corpora" / "fastapi-docs").rglob("*.md")):
        texts += [f.text for f in chunk_text(p.read_text(encoding="utf-8"), p.name, counter.count_tokens)]
    fragments = texts[:: max(1, len(texts) // n)][:n]
    queries = [json.loads(line)["text"] for line in
               (SCIFACT / "queries-train.jsonl").read_text(encoding="utf-8").splitlines()][:n]
    import numpy as np

    return {"fastapi_fragments": {"mean_tokens": round(float(np.mean(counter.count_tokens(fragments))), 1),
                                  **_compare(env, fragments, rounds)},
            "scifact_queries": {"mean_tokens": round(float(np.mean(counter.count_tokens(queries))), 1),
                                **_compare(env, queries, rounds)}}


def quality_run(reuse_float: bool = False) -> dict:
    """SciFact indexed cold through the product twice, with the float model and with the int8 model (the
    default; fresh processes, one after the other): indexing time and peak RSS, then nDCG@10 of the train
    queries (embedded with the float model, as the product does), vector alone and the shipped hybrid
    ranking, on all queries and on each half (odd/even position) to show the spread. `reuse_float` keeps the
    float index an earlier run left (the float model does not change)."""
    from kb_retrieval import load_judgments, ndcg_at_10

    queries, qrels = load_judgments()
    ids = list(queries)
    texts = [queries[q] for q in ids]
    out: dict[str, dict] = {}
    for precision in ("fp32", "int8"):
        name = f"quality-{precision}"
        env = dict(bench_env(f"{name}-all"), GSD_RESEARCH_EMBEDDING_PRECISION=precision)
        if not (reuse_float and precision == "fp32" and (Path(env["GSD_RESEARCH_HOME"]) / "repositories" / "scifact" / "state.jsonl").exists()):
            env = dict(cold_scifact(None, name), GSD_RESEARCH_EMBEDDING_PRECISION=precision)
            doc, wall, rss = researcher(env, "index", "scifact")
            out[f"index_{precision}"] = {**index_figures(doc, wall), "peak_rss_mib": round(rss / 1024, 1)}
            print(json.dumps(out[f"index_{precision}"]), file=sys.stderr, flush=True)
        os.environ.update(HOME=env["HOME"], GSD_RESEARCH_HOME=env["GSD_RESEARCH_HOME"],
                          GSD_RESEARCH_EMBEDDING_PRECISION=precision)
        from gsd_research.researcher.service_factory import ServiceFactory

        factory = ServiceFactory()
        service = factory.search_service(factory.repository_service.get_repository("scifact"))
        vectors = service.embedding.embed_queries(texts)
        row = {}
        for mode in ("vector", "hybrid"):
            results = service.search_many(texts, 10, 10, mode, vectors, "rsf")
            scores = [ndcg_at_10([Path(d.document_path).stem for d in docs], qrels[qid])
                      for qid, (docs, _) in zip(ids, results, strict=True)]
            row[f"ndcg@10_{mode}"] = round(sum(scores) / len(scores), 4)
            row[f"ndcg@10_{mode}_halves"] = [round(sum(scores[h::2]) / len(scores[h::2]), 4) for h in (0, 1)]
        out[f"search_{precision}_index"] = row
        print(json.dumps({f"search_{precision}_index": row}), file=sys.stderr, flush=True)
    return out


def cold_scifact(limit: int | None, prefix: str) -> dict:
    """A fresh home holding the SciFact subset as an unindexed repository `scifact`; its environment."""
    folder = prepare_scifact(limit)
    env = bench_env(f"{prefix}-{limit or 'all'}")
    shutil.rmtree(env["GSD_RESEARCH_HOME"], ignore_errors=True)
    researcher(env, "repo", "add", "scifact", str(folder), "--file-types", "md")
    return env


def memory_run(pairs: int = 2) -> dict:
    """Cold index of the first 1,000 SciFact abstracts, then of all 5,183, as fresh processes; the pair
    repeated `pairs` times (the machine is shared: each figure is reported, none averaged away)."""
    out: dict[str, list] = {}
    for _ in range(pairs):
        for limit in (1000, None):
            name = f"scifact-{limit or 'all'}"
            env = cold_scifact(limit, "scifact")
            doc, wall, rss = researcher(env, "index", "scifact")
            out.setdefault(name, []).append({**index_figures(doc, wall), "peak_rss_mib": round(rss / 1024, 1)})
            print(json.dumps({name: out[name][-1]}), file=sys.stderr, flush=True)
    out["all_minus_1000_mib"] = [round(b["peak_rss_mib"] - a["peak_rss_mib"], 1)
                                 for a, b in zip(out["scifact-1000"], out["scifact-all"], strict=True)]
    return out


def phases_run() -> dict:
    """Where the peak is: resident memory of a cold `researcher index` sampled every 0.1 s and split at the
    moment its vector store appears (phase 1: convert, chunk, embed into the spool; phase 2: Chroma and the
    lexical index). Phase 2 is the part that grows with the index; phase 1 holds the embedding model."""
    out = {}
    for limit in (1000, None):
        env = cold_scifact(limit, "phases")
        store = Path(env["GSD_RESEARCH_HOME"]) / "repositories" / "scifact" / "chroma"
        proc = subprocess.Popen([str(BIN / "researcher"), "index", "scifact", "--json"], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        peaks = {1: 0, 2: 0}
        while proc.poll() is None:
            try:
                status = Path(f"/proc/{proc.pid}/status").read_text()
            except OSError:
                break
            rss = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:"))
            phase = 2 if store.exists() else 1
            peaks[phase] = max(peaks[phase], rss)
            time.sleep(0.1)
        out[f"scifact-{limit or 'all'}"] = {"phase1_embed_peak_mib": round(peaks[1] / 1024, 1),
                                            "phase2_store_peak_mib": round(peaks[2] / 1024, 1)}
        print(json.dumps(out), file=sys.stderr, flush=True)
    return out


CHROMA_ALONE = """
import hashlib, json, shutil, sqlite3, sys
import numpy as np
n, db, path = int(sys.argv[1]), sys.argv[2], sys.argv[3]
def rss():
    d = {k: int(v.split()[0]) // 1024 for k, _, v in (ln.partition(":") for ln in open("/proc/self/status"))
         if k in ("VmRSS", "VmHWM")}
    return d
rows = sqlite3.connect(db).execute("SELECT fragment_id, text, document_path, fragment_index FROM fragments "
                                   "ORDER BY rowid LIMIT ?", (n,)).fetchall()
shutil.rmtree(path, ignore_errors=True)
import chromadb
from chromadb.config import Settings
col = chromadb.PersistentClient(path=path, settings=Settings(anonymized_telemetry=False)).get_or_create_collection(
    "researcher-scifact", embedding_function=None, metadata={"hnsw:space": "cosine"})
opened, rng = rss(), np.random.default_rng(0)
for s in range(0, len(rows), 128):
    part = rows[s:s + 128]
    v = rng.standard_normal((len(part), 384)).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    col.upsert(ids=[r[0] for r in part], embeddings=v.tolist(), documents=[r[1] for r in part],
               metadatas=[{"document_path": r[2], "fragment_index": r[3], "file_type": "md",
                           "checksum": hashlib.sha256(r[2].encode()).hexdigest()} for r in part])
end = rss()
print(json.dumps({"fragments": len(rows), "opened_mib": opened["VmRSS"], "peak_mib": end["VmHWM"],
                  "growth_mib": end["VmHWM"] - opened["VmRSS"]}))
"""


def chroma_alone_run(pairs: int = 2) -> dict:
    """Chroma alone, no product code: upsert the first 1,974 / all 10,314 SciFact fragments (the texts and
    metadata the product stored, random unit vectors) in batches of 128, as fresh processes with
    MALLOC_ARENA_MAX=2 (what the indexer sets); growth = peak RSS minus RSS after opening the store.
    Needs the index of `--part memory` (its lexical.sqlite supplies the texts)."""
    db = WORK / "home-scifact-all" / "repositories" / "scifact" / "lexical.sqlite"
    env = dict(os.environ, MALLOC_ARENA_MAX="2")
    out: dict[str, list] = {}
    for _ in range(pairs):
        for n in (1974, 10314):
            proc = subprocess.run([sys.executable, "-c", CHROMA_ALONE, str(n), str(db), str(WORK / "chroma-alone")],
                                  env=env, capture_output=True, text=True, check=True)
            out.setdefault(str(n), []).append(json.loads(proc.stdout.strip().splitlines()[-1]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--part", default="all", choices=["fastapi", "mixed", "embed", "quality", "memory", "memory-phases",
                                                     "chroma-memory", "all"])
    parser.add_argument("--pairs", type=int, default=2, help="memory: how many 1,000 / 5,183 pairs to run")
    parser.add_argument("--rounds", type=int, default=5, help="embed: interleaved rounds per system")
    parser.add_argument("--reuse-float", action="store_true", help="quality: keep the float index of a run before")
    args = parser.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    figures = {}
    if args.part in ("embed", "all"):
        figures["embedding"] = embed_run(rounds=args.rounds)
    if args.part in ("fastapi", "all"):
        figures["fastapi-docs"] = corpus_run("fastapi", SHARED / "bench" / "corpora" / "fastapi-docs", True)
    if args.part in ("mixed", "all"):
        figures["mixed-formats"] = corpus_run("mixed", SHARED / "bench" / "corpora" / "mixed-formats", False)
    if args.part in ("memory", "all"):
        figures["memory"] = memory_run(args.pairs)
    if args.part == "quality":
        figures["quality"] = quality_run(args.reuse_float)
    if args.part == "memory-phases":
        figures["memory_phases"] = phases_run()
    if args.part == "chroma-memory":
        figures["chroma_alone"] = chroma_alone_run(args.pairs)
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
