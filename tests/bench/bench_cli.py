"""What the bench's tests share: `python -m bench` into a temporary folder, a block's table rows, a raw row's meta."""

import json
from pathlib import Path

META = {
    "command": "python -m bench",
    "date": "2026-01-01 00:00",
    "machine": "a CPU",
    "torch": "2",
    "transformers": "5",
    "threads": 1,
    "load_start": 0.5,
    "load_end": 0.7,
}


def run_bench(tmp_path: Path, data_dir: Path, *flags: str) -> list[dict]:
    """Run `python -m bench` on the CPU, ungated, on `data_dir`, writing into `tmp_path`; return the raw rows."""
    from bench.__main__ import main

    where = ["--out", str(tmp_path / "BENCH.md"), "--results", str(tmp_path / "results")]
    main(["--device", "cpu", "--data-dir", str(data_dir), "--max-other-cores", "0", *where, *flags])
    raw = tmp_path / "results" / "_bench" / "bench.jsonl"
    return [json.loads(line) for line in raw.read_text().splitlines()]


def row(block: str, name: str) -> list[str]:
    """Return the cells of the Markdown table row of `block` whose first cell is `name`."""
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in block.splitlines() if line.startswith("|")]
    (cells,) = [cells for cells in rows if cells[0] == name]
    return cells
