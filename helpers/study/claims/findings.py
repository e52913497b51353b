"""The findings table that opens Experiment/REPORT.md: one row per claim of the study, with the published
evidence, the evidence measured here (device, variant, runs), and a verdict a stated rule computes.

    table = findings(df, "Experiment/published")    # df: helpers.study.frame.load(...)[0]
    print(markdown(table))

Verdicts are "holds", "does not hold" (records of the claim's own kind only), "consistent on proxy" /
"contradicted on proxy", "consistent with the model" / "contradicted by the model", "inconclusive" (with
the smallest effect the sample resolves) or "not testable here" (with what it needs). How comparisons
combine into a verdict is in helpers/study/claims/verdict.py; the claims are in throughput.py, trn1.py (trn1's
internals), recipe.py (stochastic rounding, learning rate and LLRD), speedup.py (speedup and cost) and
lora.py.
"""

from __future__ import annotations

from dataclasses import asdict

import pandas as pd

from helpers.study.claims import lora, recipe, speedup, throughput, trn1
from helpers.study.claims.quotes import short_says, study_says
from helpers.study.claims.verdict import PROXY_RULE
from helpers.study.published import PUBLISHED_DIR

QUESTION = "What do the study's claims come to on the machines whose records are here?"

CLAIMS = (
    throughput.batch_scaling,
    throughput.seq_len,
    throughput.padding,
    trn1.padding_77h,
    trn1.optlevel,
    recipe.stochastic_rounding,
    recipe.lr_llrd,
    throughput.small_batch_util,
    trn1.dma_bound,
    speedup.speedup,
    speedup.cost_ranking,
    trn1.allreduce,
    trn1.gradient_checkpointing,
    trn1.host_memory,
    lora.lora_accuracy,
    lora.lora_speed,
)


# claims about trn1's internals: they wait for a trn1 record and are never proxied; the others concern the
# workload, where a proxy may speak, graded as a proxy
TRN1_INTERNALS = (
    "padding_77h",
    "optlevel",
    "small_batch_util",
    "dma_bound",
    "allreduce",
    "gradient_checkpointing",
    "host_memory",
)
SCOPES = {
    True: "trn1 internals: waits for a trn1 record, never proxied",
    False: "workload: a proxy may speak, graded as a proxy",
}
# each claim's name in the summary, a few words
NAMES = {
    "batch_scaling": "Batch 8 → 64",
    "seq_len": "L=32 vs L=128",
    "padding": "Dynamic padding on XLA",
    "padding_77h": "77 h of recompiles",
    "optlevel": "--optlevel 1 vs 2, 3",
    "stochastic_rounding": "Stochastic rounding",
    "lr_llrd": "LR and LLRD tuning",
    "small_batch_util": "Small-batch utilization",
    "dma_bound": "DMA-bound at batch 8",
    "speedup": "Optimized speedup",
    "cost_ranking": "Cost per task",
    "allreduce": "AllReduce bandwidth",
    "gradient_checkpointing": "Gradient checkpointing",
    "host_memory": "Host memory",
    "lora_accuracy": "LoRA accuracy",
    "lora_speed": "LoRA speed",
}
# why an inconclusive verdict could not speak (the reasons' openings), shown in the summary
BLOCKS = ("an arm did not learn", "the arms use different optimizers", "the learning-rate search has not been run")


def findings(df: pd.DataFrame, published_dir: str = PUBLISHED_DIR) -> pd.DataFrame:
    """Return one row per claim: key, claim, the study's words (whole and short), scope, published, measured,
    verdict, rule, reason, basis, headline."""
    return pd.DataFrame(
        [
            {
                "key": judge.__name__,
                "claim": (f := asdict(judge(df, published_dir)))["claim"],
                "study": study_says(judge.__name__, published_dir),
                "short": short_says(judge.__name__, published_dir),
                "scope": SCOPES[judge.__name__ in TRN1_INTERNALS],
                **f,
            }
            for judge in CLAIMS
        ]
    )


def escaped(text: str) -> str:
    """Return text safe inside a Markdown table cell."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def verdict_cell(row: pd.Series) -> str:
    """Return the verdict in bold, with what kept an inconclusive one from speaking."""
    blocks = [b for b in BLOCKS if b in row["reason"]] if row["verdict"] == "inconclusive" else []
    return f"**{row['verdict']}**" + (": " + "; ".join(blocks) if blocks else "")


def rests_on(row: pd.Series) -> str:
    """Return the one number a verdict rests on, or, untested, what it needs (up to the first colon)."""
    if row["headline"]:
        return row["headline"]
    return row["reason"].split(":")[0].split(";")[0]


def summary(table: pd.DataFrame) -> str:
    """Return the at-a-glance table: per claim a short quote, the verdict and the number it rests on, each
    claim linked to its section below."""
    shown = pd.DataFrame(
        {
            "claim": [f"[{NAMES[k]}](#claim-{k})" for k in table["key"]],
            "the study says": table["short"],
            "verdict": table.apply(verdict_cell, axis=1),
            "rests on": table.apply(rests_on, axis=1),
        }
    )
    return shown.map(escaped).to_markdown(index=False, disable_numparse=True)


def counts(table: pd.DataFrame) -> str:
    """Return the verdict counts in one sentence."""
    n = table["verdict"].value_counts()
    return (
        f"Of {len(table)} claims, on records of the claim's own kind {n.get('holds', 0)} hold and "
        f"{n.get('does not hold', 0)} do not hold; on proxies (direction only) "
        f"{n.get('consistent on proxy', 0)} are consistent and {n.get('contradicted on proxy', 0)} "
        f"contradicted; against a model's estimate {n.get('consistent with the model', 0)} are "
        f"consistent and {n.get('contradicted by the model', 0)} contradicted; "
        f"{n.get('inconclusive', 0)} are inconclusive and {n.get('not testable here', 0)} are not "
        "testable here."
    )


def details(row: pd.Series) -> str:
    """Return one claim's own section: the study's words, who may speak, the published figures, the rule, the
    measurements and records, and the verdict with its reason."""
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
    """Return the findings as Markdown: the question, the summary table and the counts, then the proxy rule
    and one section per claim."""
    sections = "\n\n".join(details(r) for _, r in table.iterrows())
    return (
        f"{QUESTION}\n\n{summary(table)}\n\n{counts(table)}\n\n## The claims one by one\n\n{PROXY_RULE}\n\n{sections}\n"
    )
