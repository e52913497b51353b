"""What the bench's tests share: `python -m bench` run into a temporary folder."""

import json
from pathlib import Path


def run_bench(tmp_path: Path, data_dir: Path, *flags: str) -> list[dict]:
    """Run `python -m bench` on the CPU, ungated, on `data_dir`, writing into `tmp_path`; return the raw rows."""
    from bench.__main__ import main

    where = ["--out", str(tmp_path / "BENCH.md"), "--results", str(tmp_path / "results")]
    main(["--device", "cpu", "--data-dir", str(data_dir), "--max-other-cores", "0", *where, *flags])
    raw = tmp_path / "results" / "_bench" / "bench.jsonl"
    return [json.loads(line) for line in raw.read_text().splitlines()]
