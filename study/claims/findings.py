"""The findings table that opens Experiment/REPORT.md: one row per claim of the study, with the published
evidence, the evidence measured here (device, variant, runs), and a verdict a stated rule computes.
"""

from __future__ import annotations

from dataclasses import asdict

import pandas as pd

from study.claims import lora, recipe, speedup, throughput, trn1
from study.claims.quotes import short_says, study_says
from study.claims.verdict import PROXY_RULE, VERDICTS, prepare
from study.notation import short_device
from study.published import PUBLISHED_DIR

QUESTION = "What do the study's claims come to on the machines whose records are here?"

# each its name in the summary (a few words), and whether it concerns trn1's internals: those wait for a
# trn1 record and are never proxied; the others concern the workload, where a proxy may speak, graded as a proxy
CLAIMS = {
    throughput.batch_scaling: ("Batch 8 → 64", False),
    throughput.seq_len: ("L=32 vs L=128", False),
    throughput.padding: ("Dynamic padding on XLA", False),
    trn1.padding_77h: ("77 h of recompiles", True),
    trn1.optlevel: ("--optlevel 1 vs 2, 3", True),
    recipe.stochastic_rounding: ("Stochastic rounding", False),
    recipe.lr_llrd: ("LR and LLRD tuning", False),
    throughput.small_batch_util: ("Small-batch utilization", True),
    trn1.dma_bound: ("DMA-bound at batch 8", True),
    speedup.speedup: ("Optimized speedup", False),
    speedup.cost_ranking: ("Cost per task", False),
    trn1.allreduce: ("AllReduce bandwidth", True),
    trn1.gradient_checkpointing: ("Gradient checkpointing", True),
    trn1.host_memory: ("Host memory", True),
    lora.lora_accuracy: ("LoRA accuracy", False),
    lora.lora_speed: ("LoRA speed", False),
}
SCOPES = {
    True: "trn1 internals: waits for a trn1 record, never proxied",
    False: "workload: a proxy may speak, graded as a proxy",
}
# why an inconclusive verdict could not speak (the reasons' openings), shown in the summary
BLOCKS = ("an arm did not learn", "the arms use different optimizers")


def findings(df: pd.DataFrame, published_dir: str = PUBLISHED_DIR) -> pd.DataFrame:
    """Return one row per claim: its key, the study's words (whole and short), its scope, and its Finding's fields."""
    df = prepare(df)
    return pd.DataFrame(
        [
            {
                "key": judge.__name__,
                "claim": (f := asdict(judge(df, published_dir)))["claim"],
                "study": study_says(judge.__name__, published_dir),
                "short": short_says(judge.__name__, published_dir),
                "scope": SCOPES[trn1_internal],
                **f,
            }
            for judge, (_, trn1_internal) in CLAIMS.items()
        ]
    )


def escaped(text: str) -> str:
    """Return text safe inside a Markdown table cell."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def blocks(row: pd.Series) -> list[str]:
    """Return what kept an inconclusive verdict from speaking (an arm that did not learn, ...)."""
    return [b for b in BLOCKS if b in row["reason"]] if row["verdict"] == "inconclusive" else []


def verdict_cell(row: pd.Series, why: bool = True) -> str:
    """Return the verdict's symbol and word in bold, and (`why`) what kept an inconclusive one from speaking."""
    said = blocks(row) if why else []
    return f"{VERDICTS[row['verdict']]} **{row['verdict']}**" + (": " + "; ".join(said) if said else "")


def rests_on(row: pd.Series) -> str:
    """Return the one number a verdict rests on, or, untested, what it needs (up to the first colon)."""
    if row["headline"]:
        return row["headline"]
    return row["reason"].split(":")[0].split(";")[0]


def summary(table: pd.DataFrame, page: str = "", quotes: bool = True) -> str:
    """Return the at-a-glance table per claim (quote, verdict, the figure it rests on); narrow without `quotes`."""
    # the narrow table keeps each name and verdict on one line (no-break spaces): the figures wrap instead
    keep = (lambda text: text) if quotes else (lambda text: text.replace(" ", "\u00a0"))
    names = {judge.__name__: name for judge, (name, _) in CLAIMS.items()}
    shown = pd.DataFrame(
        {
            "claim": [f"[{keep(names[k])}]({page}#claim-{k})" for k in table["key"]],
            **({"the study says": table["short"]} if quotes else {}),
            "verdict": [keep(verdict_cell(r, why=quotes)) for _, r in table.iterrows()],
            "rests on": [
                rests_on(r) + ("" if quotes or not blocks(r) else f" ({'; '.join(blocks(r))})")
                for _, r in table.iterrows()
            ],
        }
    )
    return shown.map(escaped).to_markdown(index=False, disable_numparse=True)


def counts(table: pd.DataFrame) -> str:
    """Return the verdict counts in one sentence, each with its symbol (the summary's legend)."""
    n = table["verdict"].value_counts()

    def said(verdict: str, words: str) -> str:
        return f"{VERDICTS[verdict]} {n.get(verdict, 0)} {words}"

    return (
        f"Of {len(table)} claims, on records of the claim's own kind (bert-base on a GPU or trn1) "
        f"{said('holds', 'hold')} and {said('does not hold', 'do not hold')}; on proxies (direction only) "
        f"{said('consistent on proxy', 'are consistent')} and {said('contradicted on proxy', 'contradicted')}; "
        f"{said('inconclusive', 'are inconclusive')} and "
        f"{said('not testable here', 'are not testable here')}."
    )


def details(row: pd.Series) -> str:
    """Return one claim's own section in Markdown."""
    return "\n".join(
        [
            f'### <a id="claim-{row["key"]}"></a>{row["claim"]}',
            "",
            f"- **The study** {row['study']}",
            f"- **Who may speak**: {row['scope']}.",
            f"- **Published**: {row['published']}.",
            f"- **Rule**: {row['rule']}",
            f"- **Measured here** (records): {row['measured']}.",
            f"- **Verdict**: **{row['verdict']}**: {row['reason']}.",
        ]
    )


def markdown(table: pd.DataFrame) -> str:
    """Return the findings as Markdown: the summary table, the counts, then one section per claim (claims.md)."""
    sections = "\n\n".join(details(r) for _, r in table.iterrows())
    return (
        f"{QUESTION}\n\n{summary(table)}\n\n{counts(table)}\n\n## The claims one by one\n\n{PROXY_RULE}\n\n{sections}\n"
    )


def named(devices: list[str]) -> str:
    """Return 'a', 'a and b' or 'a, b and c'."""
    return " and ".join([", ".join(devices[:-1]), devices[-1]] if len(devices) > 1 else devices)


def bottom_line(current: pd.DataFrame, table: pd.DataFrame) -> str:
    """Return the answer to "trn1 or GPU?" the current points allow (the frame `table` was judged on), in two
    plain sentences."""
    done = current[current["status"] == "finished"]

    def names(cls: str, real: bool = False) -> list[str]:
        rows = done[(done["cls"] == cls) & ~(done["proxy"] & real)]
        return sorted({short_device(d) for d in rows["device"]})

    n = table["verdict"].value_counts()
    trn1, gpu = names("trn1", real=True), names("gpu", real=True)
    if trn1 and gpu:
        first = (
            f"The records hold bert-base on trn1 ({named(trn1)}) and on a GPU ({named(gpu)}), so the claims below "
            "compare the two on the study's own workload"
        )
    else:
        missing = " or on ".join(w for w, have in (("a trn1", trn1), ("a GPU", gpu)) if not have)
        first = (
            f"No record here trains bert-base on {missing}, so these records cannot say whether trn1 or a GPU trains "
            f"the study's job faster or cheaper; {n.get('not testable here', 0)} of the {len(table)} claims are not "
            "testable here"
        )
    measured = [f"the {named(names(c))}" + " GPU" * (c == "gpu") for c in ("gpu", "trn1") if names(c)]
    xla = names("xla-cpu")
    if names("cpu"):
        measured.append(f"the CPUs {named(names('cpu'))}" + (f" (torch-xla on {len(xla)} of them)" if xla else ""))
    proxied = (
        f"{n.get('consistent on proxy', 0)} consistent with the study and {n.get('contradicted on proxy', 0)} "
        f"contradicting it on a proxy, {n.get('inconclusive', 0)} inconclusive"
    )
    second = f"What was measured ran on {named(measured) or 'no device'}, " + (
        f"and {n.get('holds', 0)} claims hold there and {n.get('does not hold', 0)} do not; {proxied}"
        if trn1 or gpu  # bert-base on a GPU or a NeuronCore: verdicts of the claim's own kind
        else f"mostly MiniLM as a stand-in, so it shows directions only: {proxied}"
    )
    return f"**Bottom line.** {first}. {second}."
