"""Ask the course questions from the command line.

    python -m part0_foundations.l05_rag build site --out _build/rag            # chunk, embed, index, write
    python -m part0_foundations.l05_rag ask _build/rag "How is the KV cache sized?" -k 5 --budget 512
    python -m part0_foundations.l05_rag eval site                             # recall@1, recall@5, MRR

``ask`` prints the retrieved chunks (rank, cosine, source, offsets) and the assembled prompt; it does not generate
an answer (hand the prompt to any model). Bad input → one line on stderr and exit status 2.
"""
from __future__ import annotations

import argparse
import os
import sys


def _build(a):
    from part0_foundations.l05_rag.pipeline import build_store

    meta = build_store(a.folder, a.out, size=a.size, overlap=a.overlap, kind=a.index, nprobe=a.nprobe)
    print(f"indexed {meta['chunks']} chunks of {meta['documents']} files from {a.folder} into {a.out}/ "
          f"({meta['kind']}, d={meta['dim']}): index file {meta['index_file_bytes']:,} bytes "
          f"(formula {meta['index_formula_bytes']:,})")
    return 0


def _ask(a):
    from part0_foundations.l05_rag.embed import count_tokens
    from part0_foundations.l05_rag.pipeline import open_store, retrieve
    from part0_foundations.l05_rag.rag import build_prompt

    if not a.question.strip():
        raise ValueError("question must be a non-empty string")
    store = open_store(a.index_dir)
    hits = retrieve(store, a.question, a.k)
    print(f"# top {len(hits)} of {store.index.ntotal} chunks")
    for h in hits:
        c = h.chunk
        preview = " ".join(c.text.split())[:100]
        print(f"{h.rank:2d}  {h.score:.3f}  {c.source} [{c.start}:{c.end}]  {preview}")
    prompt, cited = build_prompt(a.question, hits, a.budget, count_tokens=count_tokens)
    print(f"\n# prompt: {count_tokens(prompt)} of {a.budget} tokens, {len(cited)} of {len(hits)} chunks cited\n")
    print(prompt)
    return 0


def _eval(a):
    from part0_foundations.l05_rag.evalset import evaluate, format_table

    print(format_table(evaluate(a.folder, kind=a.index)))
    return 0


def _positive(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m part0_foundations.l05_rag", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="index the Markdown files under a folder")
    b.add_argument("folder")
    b.add_argument("--out", required=True, help="folder to write index.faiss, chunks.jsonl, meta.json")
    b.add_argument("--size", type=_positive, default=800, help="chunk size in characters (default 800)")
    b.add_argument("--overlap", type=int, default=200, help="characters shared by neighbouring chunks (default 200)")
    b.add_argument("--index", choices=("flat", "ivf"), default="flat")
    b.add_argument("--nprobe", type=_positive, default=2, help="IVF lists scanned per search (default 2)")
    b.set_defaults(func=_build)
    q = sub.add_parser("ask", help="retrieve chunks for a question and print the prompt")
    q.add_argument("index_dir")
    q.add_argument("question")
    q.add_argument("-k", type=_positive, default=5, help="chunks to retrieve (default 5)")
    q.add_argument("--budget", type=_positive, default=512, help="prompt budget in tokens (default 512)")
    q.set_defaults(func=_ask)
    e = sub.add_parser("eval", help="recall@1, recall@5 and MRR of the labelled questions over a site folder")
    e.add_argument("folder")
    e.add_argument("--index", choices=("flat", "ivf"), default="flat")
    e.set_defaults(func=_eval)
    a = p.parse_args(argv)
    try:
        return a.func(a)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader went away (`... | head`): not an error; keep Python from complaining at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
