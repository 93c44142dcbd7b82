"""The user's own benchmark files, found by the names the papers ship them under in the `--data` folder."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

_POSITIONAL = re.compile(r"nq-open-(\d+)_total_documents_gold_at_(\d+)\.jsonl(?:\.gz)?$")
_KV = re.compile(r"kv-retrieval-(\d+)_keys\.jsonl(?:\.gz)?$")


@dataclass(frozen=True, slots=True)
class Sources:
    """Where the papers' files are, when the user has them; every field empty means generate everything."""

    qa_oracle: Path | None = None
    qa_positional: tuple[tuple[int, int, Path], ...] = ()
    """(documents, gold index, file) for each `nq-open-N_total_documents_gold_at_i` file."""
    kv: tuple[tuple[int, Path], ...] = ()
    gsm8k: Path | None = None
    squad: Path | None = None
    documents: Path | None = None
    """A folder of the user's own documents for SWiM (`*.txt`, `*.md`)."""

    def positional_file(self, documents: int, position: int) -> Path | None:
        return next((p for n, i, p in self.qa_positional if (n, i) == (documents, position)), None)

    def kv_file(self, pairs: int) -> Path | None:
        return next((p for n, p in self.kv if n == pairs), None)


def find_sources(data: Path | None, documents: Path | None = None) -> Sources:
    """Every known file under `data` (searched recursively); `documents` is passed through."""
    if data is None:
        return Sources(documents=documents)
    files = sorted(p for p in data.rglob("*") if p.is_file())
    positional, kv = [], []
    oracle = gsm8k = squad = None
    for path in files:
        if match := _POSITIONAL.search(path.name):
            positional.append((int(match[1]), int(match[2]), path))
        elif match := _KV.search(path.name):
            kv.append((int(match[1]), path))
        elif path.name.startswith("nq-open-oracle.jsonl"):
            oracle = path
        elif (path.name == "test.jsonl" and "gsm8k" in str(path).lower()) or path.name.startswith("gsm8k"):
            gsm8k = path
        elif path.name.startswith("squad") and path.suffix == ".json":
            squad = path
    return Sources(oracle, tuple(positional), tuple(kv), gsm8k, squad, documents)
