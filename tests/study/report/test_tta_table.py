"""study/report/tta_table.py: the time-to-accuracy headline table, from records' time_to_accuracy sections: seeds that reach a target
and seeds that do not, each shown as such."""

from record_fixtures import record

from study.frame import frame
from study.report import sections
from study.sweep.suites import resolve_suite


def seed_run(seed: int, to88: float | None, to90: float | None, test: float | None = None) -> dict:
    rec = record("cpu", "time_to_accuracy", {"seed": seed}, run_name=f"time_to_accuracy-quick-seed{seed}")
    hit = lambda s, extra=None: (
        {"train_time_s": s, "step": 100, **(extra or {})}
        if s
        else {"train_time_s": None, "reason": "not reached (best 89.00% in 10 evaluations)"}
    )
    rec["time_to_accuracy"] = {"0.88": hit(to88), "0.90": hit(to90, {"test_accuracy": test}), "0.92": hit(None)}
    return rec


def test_the_table_shows_each_targets_seconds_over_the_seeds_that_reached_it():
    recs = [seed_run(1, 100.0, 150.0, 0.90), seed_run(2, 120.0, 170.0, 0.91), seed_run(3, 110.0, None)]
    text = sections.section(resolve_suite("time_to_accuracy"), frame(recs))
    row = next(line for line in text.splitlines() if line.startswith("| Xeon"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    # each time is the first evaluation at or past the target: an upper bound, and said so
    assert cells[1] == "the device itself"  # the CPU named in the row is the machine the seconds are from
    assert cells[3] == "3" and cells[4].startswith("≤ 110 ± ") and cells[4].endswith("(3/3)")
    assert cells[5].startswith("≤ 160 ± ") and cells[5].endswith("(2/3)")
    assert cells[6] == "not reached (0/3)" and cells[7].startswith("≤ 100") and cells[7].endswith("(2/3)")
    assert cells[8] == "190% of 200%"  # the fixture CPU's process: 95% of each of its 2 threads, not loaded
    assert cells[9] == "90.5"  # steps to 90%, then the test accuracy of that checkpoint
    assert "to 88% (s, ≤)" in text and "an upper bound (≤)" in text and "not wall time" in text


def test_no_records_say_how_to_make_them():
    assert "python -m study.sweep time_to_accuracy" in sections.section(resolve_suite("time_to_accuracy"), frame([]))


def test_a_recipe_search_gets_one_row_per_candidate_with_its_final_test_accuracy():
    recs = []
    for lr, seconds, final in ((2e-4, 100.0, 0.905), (3e-4, None, 0.88)):
        for seed in (1, 2):
            rec = seed_run(seed, seconds, seconds, 0.9 if seconds else None)
            rec["params"].update(lr=lr, batch=32, max_length=32)
            rec["run_name"] = f"recipe-quick-lr={lr},seed={seed}"
            rec["metrics"]["test_accuracy"] = final
            recs.append(rec)
    text = sections.section(resolve_suite("recipe"), frame(recs))
    rows = [line for line in text.splitlines() if line.startswith("| Xeon")]
    assert len(rows) == 2  # the candidates are not pooled
    fast = next(r for r in rows if "0.0002" in r)
    slow = next(r for r in rows if "0.0003" in r)
    assert "(2/2)" in fast and fast.rstrip(" |").endswith("90.5")
    assert "not reached (0/2)" in slow and slow.rstrip(" |").endswith("88")


def test_seconds_from_a_loaded_machine_are_marked_with_its_process_cpu():
    recs = [seed_run(1, 100.0, 150.0, 0.90), seed_run(2, 120.0, 170.0, 0.91)]
    recs[1]["utilization"]["proc_cpu_util_pct_mean"] = 110.0  # another process took the cores: 110% of 200%
    text = sections.section(resolve_suite("time_to_accuracy"), frame(recs))
    cells = [
        c.strip() for c in next(line for line in text.splitlines() if line.startswith("| Xeon")).strip("|").split("|")
    ]
    assert cells[4].endswith("(2/2), loaded") and cells[5].endswith(", loaded")
    assert cells[7] == "≤ 100 ± 0 (2/2)"  # steps: the machine's load does not change them
    assert cells[8] == "110–190% of 200% (loaded)"


def test_a_gpus_row_names_its_host_cpu_and_its_host_bound_status():
    recs = [seed_run(1, 100.0, 150.0, 0.90)]
    recs[0]["device"] = {**record("h200", None, {})["device"]}
    steps = [record("h200", "batch_scaling", {"batch": b}, run_name=f"b{b}", step_ms=19.0) for b in (8, 64)]
    text = sections.section(resolve_suite("time_to_accuracy"), frame(recs + steps).query("suite == 'time_to_accuracy'"))
    row = next(line for line in text.splitlines() if line.startswith("| H200"))
    assert row.startswith("| H200 (host-bound) ") and "family not recorded, AVX512+amx_bf16" in row
