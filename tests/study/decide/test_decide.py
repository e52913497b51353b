"""helpers/study/decide/ranking.py: the decision table, break-even epochs, the report section, plot and CLI, from
record files shaped as trn1, A100, this CPU and XLA-on-CPU write them (tests/record_fixtures.py)."""
import math

import pandas as pd
import pytest

from helpers.study.decide import command as cli
from helpers.calc import job as calc
from helpers.run import records
from helpers.study.decide import ranking as decide
from helpers.study.report import frame
from helpers.study.report.build import current_names
from helpers.study.sweep.suites import find_suites
from tests.record_fixtures import DEVICES, record

OPTIMIZED = {"preset": "optimized", "model_name": "bert-base-uncased"}
# 94% first reached at 8,000 samples: half an epoch of 16,000 rows
CURVE = [{"step": 63, "train_time_s": 10.0, "samples": 4000, "val_accuracy": 0.90},
         {"step": 125, "train_time_s": 20.0, "samples": 8000, "val_accuracy": 0.941},
         {"step": 250, "train_time_s": 40.0, "samples": 16000, "val_accuracy": 0.95}]
LOW_CURVE = [{"step": 10, "train_time_s": 100.0, "samples": 640, "val_accuracy": 0.35},
             {"step": 20, "train_time_s": 200.0, "samples": 1280, "val_accuracy": 0.60}]
TRN1 = "AWS Trainium (trn1.2xlarge) (measured)"
TRN1_USD_H, A100_USD_H, CPU_USD_H = 1.34375, 21.96 / 8, 0.096  # trn1.2xlarge, p4d.24xlarge / 8 GPUs, m6i.large
# current points of the speedup suite (the command reads only those): optimized, full and quick
SPEEDUP = sorted(current_names(find_suites())["speedup"])
FULL, QUICK = (next(n for n in SPEEDUP if n.startswith(f"speedup-{v}-preset=optimized")) for v in ("full", "quick"))


def _records() -> list[dict]:
    """trn1 and A100 in the optimized preset over all rows, this CPU and XLA-on-CPU on a 1,280-row subset."""
    subset = {**OPTIMIZED, "train_subset": 1280}
    return [record("trn1", "speedup", OPTIMIZED, samples_per_s=800.0, compile_s=300.0, compilations=4,
                   run_name=FULL, curve=CURVE, fixture=False),
            record("a100", "speedup", OPTIMIZED, samples_per_s=1200.0, run_name=FULL,
                   curve=CURVE, fixture=False),
            # a faster A100 run on a subset: rule 1 (all rows) still picks the run above
            record("a100", "speedup", subset, samples_per_s=5000.0, run_name=QUICK, fixture=False),
            record("cpu", "speedup", subset, samples_per_s=6.4, run_name=QUICK, curve=LOW_CURVE,
                   fixture=False),
            record("xla-cpu", "speedup", subset, samples_per_s=3.2, compile_s=50.0, compilations=3,
                   run_name=QUICK, fixture=False)]


@pytest.fixture()
def results(tmp_path):
    for rec in _records():
        records.write_record(records.record_path(tmp_path, rec["suite"], rec["run_name"], rec["device"]["key"]), rec)
    return tmp_path


@pytest.fixture()
def df(results) -> pd.DataFrame:
    return frame.load(results)[0]


def _row(table: pd.DataFrame, device: str, source: str = "measured") -> pd.Series:
    found = table[table["device"].str.contains(device) & (table["source"] == source)]
    assert len(found) == 1, table[["device", "source"]]
    return found.iloc[0]


def test_representative_rule_prefers_the_optimized_run_over_all_rows(df):
    chosen = decide.representative(df).set_index("device_key")
    assert chosen.loc[DEVICES["a100"]["key"], "run_name"] == FULL
    assert chosen.loc[DEVICES["a100"]["key"], "rule"] == "speedup suite, optimized preset, all rows"
    assert chosen.loc[DEVICES["cpu"]["key"], "rule"] == "speedup suite, optimized preset, subset (quick)"
    assert len(chosen) == 4


def test_decision_rows_match_hand_computed_values(df):
    table = decide.decision(df, decide.Job(epochs=3, rows=16_000, target_accuracy=0.94, shared_instance=True))
    trn1, a100 = _row(table, "Trainium"), _row(table, "A100")
    # trn1: one-off = first step (2 + 300 s) - steady step 0.08 s = 301.92 s > compile 300 s; 20 s/epoch
    assert trn1["one_off_s"] == pytest.approx(301.92)
    assert trn1["epoch_s"] == pytest.approx(16_000 / 800)
    assert trn1["job_s"] == pytest.approx(301.92 + 3 * 20)
    assert trn1["job_usd"] == pytest.approx((301.92 + 60) / 3600 * TRN1_USD_H)
    assert trn1["instance"] == "trn1.2xlarge" and trn1["energy"] == "not measured"
    # A100 eager: one-off = 2 - 0.08 s of first-step warm-up, 13.33 s/epoch; energy 48,000 samples at the
    # record's 1200 samples/s / 260 W = 4.6 samples per joule over its steady windows
    assert a100["job_s"] == pytest.approx(1.92 + 3 * 16_000 / 1200)
    assert a100["job_usd"] == pytest.approx((1.92 + 40) / 3600 * A100_USD_H)
    assert a100["energy"] == "10.4 kJ (measured)"
    # time to 94%: half an epoch after the one-off
    assert trn1["target_s"] == pytest.approx(301.92 + 0.5 * 20)
    assert a100["target"] == f"{1.92 + 0.5 * 16_000 / 1200:.4g} s (0.50 epochs)"
    # CPU: priced on the 2-vCPU stand-in; never reached 94% in the 1,280 rows it saw
    cpu = _row(table, "^Xeon", "proxy")  # the CPU stands in for the study's job: a proxy row
    assert cpu["instance"] == "m6i.large" and cpu["usd_per_h"] == CPU_USD_H
    assert cpu["target"] == "not reached in 1 epoch (best 60.0%)" and math.isnan(cpu["target_s"])
    assert _row(table, "XLA", "proxy")["one_off_s"] == pytest.approx(2 + 50 - 0.08)  # first step, compile inside
    # published rows beside, the L4 priced on g6.xlarge with the study's price kept
    l4 = _row(table, "L4", "published")
    assert (l4["instance"], l4["published_usd_per_h"]) == ("g6.xlarge", 0.576)
    assert _row(table, "trn1", "published")["one_off_s"] == pytest.approx(301.92)  # from the trn1 record
    # marks only among rows of one configuration: the CPU and XLA-on-CPU ran bert-base b64 L32 fp32 over 1,280
    # rows; trn1, the A100 and the study's four its optimized run in bf16 over 16,000
    assert cpu["mark"] == "cheapest of 2 (proxy); fastest of 2 (proxy)" and _row(table, "XLA", "proxy")["mark"] == ""
    assert cpu["setup"] == "bert-base-uncased, b64, L32, fp32, 1,280 rows"
    assert a100["setup"] == trn1["setup"] == l4["setup"] == "bert-base-uncased, b64, L32, bf16, 16,000 rows"
    assert "of 2" not in a100["mark"] and "of 2" not in trn1["mark"]


def test_a_single_user_pays_the_whole_instance_unless_the_job_shares_it(df):
    whole = _row(decide.decision(df, decide.Job()), "A100")
    shared = _row(decide.decision(df, decide.Job(shared_instance=True)), "A100")
    assert whole["usd_per_h"] == 21.96 and shared["usd_per_h"] == pytest.approx(21.96 / 8)
    assert whole["job_usd"] == pytest.approx(8 * shared["job_usd"])  # one A100 of a p4d.24xlarge, alone
    page = decide.markdown(t := decide.decision(df, decide.Job()), decide.break_even(t, decide.Job()), decide.Job())
    assert "p4d.24xlarge: whole $21.96/h, shared $2.745/h" in page and "priced at the whole instance" in page


def test_a_mark_needs_two_rows_of_the_same_job(df):
    alone = df[df["device"].str.contains("A100") & (df["train_subset"].isna())]
    table = decide.decision(alone, decide.Job(model="bert-base-uncased"))
    assert _row(table, "A100", "published")["mark"] == "fastest of 5 (published)"  # the A100 and the study's four
    assert "of 5" in _row(table, "L4", "published")["mark"]
    cpu_only = decide.decision(df[df["device_type"] == "cpu"], decide.Job())
    assert _row(cpu_only, "Xeon", "proxy")["mark"] == ""  # the only row over 1,280 rows: nothing to be cheapest among


@pytest.mark.parametrize("ratio, said", [(1.05, "no order can be claimed"), (1.5, "never: costs 50% more per epoch")])
def test_never_is_said_only_beyond_the_gap_single_runs_resolve(ratio, said):
    from helpers.study.decide import page

    a = {"epoch_usd": ratio, "lower_bound": False, "one_off_usd": 1.0, "usd_per_h": 1.0}
    assert said in page.reading(a, {"epoch_usd": 1.0, "one_off_usd": 0.0}, None, decide.Job())


def test_a_model_or_lora_rank_without_records_says_no_record(df):
    job = decide.Job(model="roberta-base", lora_r=8)
    table = decide.decision(df, job)
    assert table.empty and "No record for roberta-base, LoRA r=8" in decide.markdown(table, decide.break_even(table, job), job)
    assert len(decide.decision(df, decide.Job(model="bert-base-uncased"))) == len(decide.decision(df, decide.Job()))


def test_runs_sharing_the_cache_split_only_the_compilation(df):
    table = decide.decision(df, decide.Job(runs_sharing_cache=4))
    assert _row(table, "Trainium")["one_off_s"] == pytest.approx(301.92 / 4)
    assert _row(table, "A100")["one_off_s"] == pytest.approx(1.92)  # CUDA warm-up is paid by every run
    assert _row(decide.decision(df, decide.Job(warm_cache=True)), "Trainium")["one_off_s"] == 0.0


def test_target_beyond_the_job_is_not_reached(df):
    table = decide.decision(df, decide.Job(epochs=0.25, target_accuracy=0.94))
    assert _row(table, "Trainium")["target"] == "not reached in the job's 0.25 epochs (needs 0.50)"


def test_break_even_epochs_of_trn1_against_the_a100(df):
    job = decide.Job(shared_instance=True)
    table = decide.decision(df, job)
    breaks = decide.break_even(table, job).set_index(["device", "against"])
    # trn1 saves (13.33 s x $2.745 - 20 s x $1.34375) / 3600 per epoch; its extra one-off repays after ~41 epochs
    one_off = (301.92 * TRN1_USD_H - 1.92 * A100_USD_H) / 3600
    saving = (16_000 / 1200 * A100_USD_H - 20 * TRN1_USD_H) / 3600
    row = breaks.loc[(TRN1, "A100-SXM4-40GB (measured)")]
    assert row["epochs"] == pytest.approx(one_off / saving) == pytest.approx(41.2, abs=0.1)
    assert row["reading"] == f"cheaper beyond {one_off / saving:.3g} epochs"
    # the study's L4 epoch costs less than trn1's: never
    assert breaks.loc[("trn1 (published)", "L4 (published)"), "reading"].startswith("never: costs ")
    # the same arithmetic on this machine: XLA-on-CPU against the CPU
    assert ("XLA CPU (Xeon @ 2.80GHz) (proxy)", "Xeon @ 2.80GHz (proxy)") in breaks.index


def test_job_energy_is_the_records_samples_per_joule_over_its_steady_windows(tmp_path):
    two = record("a100", "speedup", OPTIMIZED, samples_per_s=2400.0, run_name="ddp", fixture=False, world_size=2)
    # both GPUs of the node over the steady windows: 20 s at 2 x 260 W, 48,000 samples of both ranks
    two["energy"].update(joules=10_400.0, mean_watts=520.0, device_count=2, samples=48_000,
                         samples_per_joule=48_000 / 10_400, whole_run={"joules": 20_000.0, "seconds": 25.0})
    older = record("t4", "speedup", OPTIMIZED, samples_per_s=400.0, run_name="old", fixture=False)
    older["energy"].update(method="measured", joules=1000.0, mean_watts=50.0, samples_per_joule=8.0)
    older["energy"].pop("window", None)  # a record from before energy followed the timing windows
    for rec in (two, older):
        records.write_record(records.record_path(tmp_path, rec["suite"], rec["run_name"], rec["device"]["key"]), rec)
    table = decide.decision(frame.load(tmp_path)[0], decide.Job(epochs=3, rows=16_000))
    assert _row(table, "A100")["energy"] == "10.4 kJ (measured)"  # 48,000 job samples / 4.6 samples per J
    assert _row(table, "T4")["energy"] == "not over the timed window (older record)"


def test_without_a_trn1_record_the_compile_is_not_measured_and_a_budget_is_given():
    job = decide.Job()
    table = decide.decision(pd.DataFrame(), job)
    assert set(table["source"]) == {"published"}
    trn1 = _row(table, "trn1", "published")
    assert trn1["lower_bound"] and math.isnan(trn1["one_off_s"])
    reading = decide.break_even(table, job).set_index("against").loc["T4 (published)", "reading"]
    # T4 job $0.05365 - trn1's 3 epochs $0.03069 = $0.02296 of trn1 time at $1.34375/h = 61.5 s
    budget = calc.one_off_budget_s(3, 27.40 / 3600 * TRN1_USD_H, 0.0, 122.39 / 3600 * 0.526, TRN1_USD_H)
    assert budget == pytest.approx(61.5, abs=0.1)
    assert reading == ("compile not measured; cheaper per epoch, so cheaper for 3 epochs if compilation takes "
                       f"under {budget:.4g} s")


def test_markdown_asks_first_and_concludes_last(df):
    job = decide.Job(shared_instance=True)
    table = decide.decision(df, job)
    lines = decide.markdown(table, decide.break_even(table, job), job).splitlines()
    assert lines[0].startswith("Which device for 3 epochs over 16,000 training rows (any model, full fine-tuning), "
                               "target 94%") and "one accelerator's share" in lines[0]
    assert lines[-1].startswith("For 3 epochs over 16,000 rows: bert-base-uncased, b64, L32, bf16, 16,000 rows: "
                                "L4 (published) is cheapest")
    assert "bert-base-uncased, b64, L32, fp32, 1,280 rows: Xeon @ 2.80GHz (proxy) is cheapest" in lines[-1]
    assert f"{TRN1} against A100-SXM4-40GB (measured): cheaper beyond 41.2 epochs" in lines[-1]
    assert "trn1 (published) against T4 (published): cheaper beyond 14.7 epochs, L4 (published): never" in lines[-1]


def test_plot_is_deterministic(df, tmp_path):
    job = decide.Job()
    table = decide.decision(df, job)
    breaks = decide.break_even(table, job)
    first = decide.plot(table, breaks, job, "python -m helpers.study.decide", tmp_path / "a.png").read_bytes()
    assert first[:8] == b"\x89PNG\r\n\x1a\n"
    assert decide.plot(table, breaks, job, "python -m helpers.study.decide", tmp_path / "b.png").read_bytes() == first


def test_cli_prints_the_table_for_a_job(results, capsys):
    cli.main(["--epochs", "3", "--rows", "16000", "--target-accuracy", "0.94", "--results", str(results)])
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("Which device for 3 epochs")
    header = next(line for line in out if line.startswith("| device"))
    assert "job $" in header and "to target" in header
    source = {line.split("|")[1].strip(): line.split("|")[2].strip() for line in out if line.startswith("| ")}
    assert {d: source[d] for d in ("AWS Trainium (trn1.2xlarge)", "A100-SXM4-40GB", "Xeon @ 2.80GHz",
                                   "XLA CPU (Xeon @ 2.80GHz)")} == {
        "AWS Trainium (trn1.2xlarge)": "measured", "A100-SXM4-40GB": "measured", "Xeon @ 2.80GHz": "proxy",
        "XLA CPU (Xeon @ 2.80GHz)": "proxy"}
    assert out[-1].startswith("For 3 epochs over 16,000 rows")
    for bad in (["--runs-sharing-cache", "0"], ["--target-accuracy", "94"], ["--lora-r", "-1"]):
        with pytest.raises(SystemExit):
            cli.main([*bad, "--results", str(results)])
    cli.main(["--model", "roberta-base", "--lora-r", "8", "--shared-instance", "--results", str(results)])
    out = capsys.readouterr().out
    assert "(roberta-base, LoRA r=8)" in out and "No record for roberta-base, LoRA r=8" in out


def test_cli_writes_a_users_job_where_asked_never_over_the_reports_figure(results, tmp_path):
    out = tmp_path / "my-job"
    cli.main(["--epochs", "5", "--results", str(results), "--write", str(out)])
    page = (out / "decide.md").read_text()
    assert page.startswith("<!-- Written by `python -m helpers.study.decide") and "Which device for 5 epochs" in page
    assert "![job cost against epochs](decide_cost.png)" in page
    assert (out / "decide_cost.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_cost_plot_colours_a_device_as_every_other_figure_does():
    from helpers.study.decide import cost_plot
    from helpers.study.report import plot_style

    a100 = plot_style.FAMILIES["a100-40gb"][0]
    assert cost_plot._colour(pd.Series({"source": "published", "device": "A100", "family": "gpu"})) == a100
    assert cost_plot._colour(pd.Series({"source": "measured", "device": "NVIDIA A100-SXM4-40GB", "family": "gpu"})) == a100
    assert cost_plot._colour(pd.Series({"source": "published", "device": "trn1", "family": "trn1"})) == \
        plot_style.FAMILIES["trn1"][0]
    assert cost_plot._colour(pd.Series({"source": "measured", "device": "Xeon", "family": "cpu"})) == \
        plot_style.FAMILIES["cpu"][0]
    two = plot_style.device_styles({"EPYC": "cpu", "Xeon": "cpu"})  # two measured CPUs: never one colour
    epyc, xeon = (cost_plot._colour(pd.Series({"source": "measured", "device": d, "family": "cpu"}), two)
                  for d in ("EPYC", "Xeon"))
    assert epyc == plot_style.FAMILIES["cpu"][0] and xeon != epyc


def test_cli_names_records_it_cannot_read_and_still_prints_the_table(results, capsys):
    import json

    (results / "speedup" / "bad@cpu-x.json").write_text(json.dumps({"run_name": "bad", "status": "exploded"}))
    newer = {"schema_version": records.SCHEMA_VERSION + 1, "run_name": "later", "status": "finished"}
    (results / "speedup" / "later@cpu-x.json").write_text(json.dumps(newer))
    (results / "speedup" / "cut@cpu-x.json").write_text('{"run_name": "cut", "sta')
    cli.main(["--epochs", "3", "--rows", "16000", "--results", str(results)])
    out, err = capsys.readouterr()
    assert "A100" in out and "bad" not in out  # the table of the valid records
    lines = err.splitlines()
    assert any(line.startswith("skipped record speedup/bad@cpu-x.json: status: ") for line in lines), err
    assert (f"skipped record speedup/later@cpu-x.json: schema_version {records.SCHEMA_VERSION + 1} is newer"
            in err)
    assert "skipped record speedup/cut@cpu-x.json: cut short or not JSON" in err


def test_the_cost_plot_promises_break_even_dots_only_where_it_draws_them(df):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from helpers.study.decide import cost_plot

    job = decide.Job()
    table = decide.decision(pd.DataFrame(), job)  # published only: trn1's compile is not measured, no crossing
    breaks = decide.break_even(table, job)
    fig, ax = plt.subplots()
    cost_plot._panel(ax, table[table["family"].isin(("trn1", "gpu"))], breaks[breaks["epochs"].notna()], job, "t", "trn1")
    assert "no break-even" in ax.get_title() and not [l for l in ax.lines if l.get_marker() == "o"]
    plt.close(fig)
    fig, ax = plt.subplots()
    table = decide.decision(df, decide.Job(shared_instance=True))
    breaks = decide.break_even(table, decide.Job(shared_instance=True))
    cost_plot._panel(ax, table[table["family"].isin(("trn1", "gpu"))], breaks[breaks["family"] == "trn1"].dropna(
        subset=["epochs"]), decide.Job(shared_instance=True), "t", "trn1")
    assert "dots: break-even" in ax.get_title() and [l for l in ax.lines if l.get_marker() == "o"]
    plt.close(fig)


def test_the_cli_reads_only_the_suites_current_points(results, capsys):
    old = record("t4", "speedup", OPTIMIZED, samples_per_s=50.0, run_name="speedup-full-preset=optimized-000000",
                 fixture=False)  # a point the suite no longer expands to: superseded
    records.write_record(records.record_path(results, "speedup", old["run_name"], old["device"]["key"]), old)
    cli.main(["--results", str(results)])
    devices = {line.split("|")[1].strip() for line in capsys.readouterr().out.splitlines() if line.startswith("| ")}
    assert "A100-SXM4-40GB" in devices and "Tesla T4" not in devices and "T4" in devices  # the study's T4 only
    assert frame.load(results)[0]["device"].str.contains("Tesla T4").any()  # the record is there, left out


def test_break_even_compares_only_rows_of_one_configuration(df):
    job = decide.Job()
    alike = decide.break_even(decide.decision(df, job), job).set_index(["device", "against"])
    # one configuration: compared (XLA on the CPU at half the CPU's samples/s costs twice as much per epoch)
    assert alike.loc[("XLA CPU (Xeon @ 2.80GHz) (proxy)", "Xeon @ 2.80GHz (proxy)"), "reading"] == \
        "never: costs 100% more per epoch"
    xla = df["device_type"] == "xla"
    unlike = df.assign(batch=df["batch"].where(~xla, 8), max_length=df["max_length"].where(~xla, 64))
    table = decide.decision(unlike, job)
    breaks = decide.break_even(table, job)
    mine = breaks[breaks["device"] == "XLA CPU (Xeon @ 2.80GHz) (proxy)"]
    assert len(mine) == 1 and mine["against"].iloc[0] == "no eager CPU run of bert-base-uncased, b8, L64, fp32, 1,280 rows"
    assert mine["reading"].iloc[0] == "not compared: no eager run of the same configuration"
    assert math.isnan(mine["epochs"].iloc[0])
    from helpers.study.decide import cost_plot

    assert cost_plot.compared(table, breaks, ("xla-cpu", "cpu")).empty  # nothing drawn under "XLA on this CPU"
    assert set(cost_plot.compared(table, breaks, ("trn1", "gpu"))["family"]) == {"trn1", "gpu"}


def test_no_cheapest_across_unlike_precisions(df):
    cpu = df["device_type"] == "cpu"
    bf16 = df.assign(precision=df["precision"].where(~cpu, "bf16"))  # the CPU in bf16, XLA on it in fp32
    table = decide.decision(bf16, decide.Job())
    assert _row(table, "^Xeon", "proxy")["mark"] == "" and _row(table, "XLA", "proxy")["mark"] == ""
    assert "Xeon @ 2.80GHz (proxy) is cheapest" not in decide.markdown(table, decide.break_even(table, decide.Job()),
                                                                         decide.Job())


def test_the_readme_command_prints_the_table_of_cost_md(capsys):
    cli.main(["--epochs", "3", "--rows", "16000", "--target-accuracy", "0.94"])  # the README's example
    printed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("|")]
    from helpers.run.args import repo_path

    committed = [line for line in repo_path("Experiment/cost.md").read_text().splitlines() if line.startswith("|")]
    assert printed == committed


def test_the_cost_plot_states_its_price_and_names_a_pair_it_cannot_draw(df):
    from plot_checks import overlaps

    from helpers.study.decide import cost_plot
    from helpers.study.report import plot_style

    xla = df["device_type"] == "xla"
    job = decide.Job()
    table = decide.decision(df.assign(batch=df["batch"].where(~xla, 8)), job)  # XLA on the CPU: no like eager run
    fig = cost_plot.figure(table, decide.break_even(table, job), job, "python -m helpers.study.decide", decide.PAIRS)
    assert overlaps(fig) == [] and len(fig.axes) == 1
    assert "priced at the whole instance: on-demand us-east-1" in fig._suptitle.get_text()
    assert "not drawn: XLA on this CPU against eager on it (no eager run of the same configuration)" in \
        plot_style.handles(fig)[1]


@pytest.mark.parametrize("flag, value", [("--epochs", "1e308"), ("--epochs", "inf"), ("--rows", "10^350"),
                                         ("--rows", "1" + "0" * 350), ("--rows", "2.5"), ("--rows", "1e10")])
def test_a_job_too_large_for_finite_costs_is_refused_clearly(results, capsys, flag, value):
    with pytest.raises(SystemExit):
        cli.main([flag, value, "--results", str(results)])
    err = capsys.readouterr().err
    assert "--epochs" in err if flag == "--epochs" else "--rows" in err
    assert "Traceback" not in err and "$inf" not in err


def test_a_deeply_nested_record_is_named_and_the_table_still_printed(results, capsys):
    (results / "speedup" / "deep@cpu-x.json").write_text("[" * 100_000 + "]" * 100_000)
    cli.main(["--rows", "1e5", "--results", str(results)])  # 1e5 reads as the whole number 100,000
    out, err = capsys.readouterr()
    assert "A100" in out and "100,000 rows" in out
    assert f"skipped record speedup/deep@cpu-x.json: nested more than {records.MAX_DEPTH} levels deep" in err
