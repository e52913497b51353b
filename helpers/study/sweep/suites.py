"""Suite files: one TOML file per report table, parsed and expanded into named grid points.

A suite file (Experiment/suites/<name>.toml) names `title`, `order` (its place in the report),
`kind` (notebook | token_stats | derived), `notebook`, `env` (main = .venv, xla = .venv-xla, which is
.venv-neuron wherever that exists: on a trn1 the Trainium notebook runs on NeuronCores),
optionally `requires` ("neuron": torch-neuronx; "fast-bf16": a GPU, trn1 or a CPU with fast bf16), `description` and
`on_demand` (true: `sweep all`, and so `make report`, leaves it out; it runs by name, and the report still tabulates
its committed records), shared `[params]`, and per variant (`[quick]`,
`[full]`) `params`, `grid` (every combination), `cases` (a list of explicit points, crossed with the
grid), `repeats` (independent processes per point, default 1), `timeout_s` and `jobs` (points run at once,
each on cpu_count / jobs threads). Parameter names
are the run's (helpers/run/args.py), checked when the file is read; TOML has no null, so "None" stands
for None. Its `[report]` table tells helpers.study.report.tables how to tabulate the records.

A point's run name is `<suite>-<variant>-<the values that vary>-<hash of every parameter>`: the same
point always gets the same name (so a resumed sweep recognises it), and editing a fixed parameter
gives new names (so records of the old definition are never taken for the new one). Repeat r > 1 of a
point adds `-rep<r>`. Points come repeat by repeat (every cell once, then every cell again), so the repeats
of one cell are spread over the sweep, not run back to back, and their spread is between runs.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import hashlib
import itertools
import json
import math
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from helpers.run.args import FIELDS, ConfigError, build_args, unknown_message
from helpers.run.paths import repo_path

SUITES_DIR = "Experiment/suites"
VARIANTS = ("quick", "full")
DEFAULT_TIMEOUT_S = 1800  # a point's limit where its suite variant gives no timeout_s
KINDS = ("notebook", "token_stats", "derived")
# folder, Jupyter kernel; "neuron" (`make neuron-venv`, trn1 only) stands in for "xla" where it exists
ENVS = {
    "main": (".venv", "accelbench"),
    "xla": (".venv-xla", "accelbench-xla"),
    "neuron": (".venv-neuron", "accelbench-neuron"),
}
REQUIRES = (None, "neuron", "fast-bf16")
# parameters that say where a run reports, not what it measures: left out of the run name's hash
WHERE = ("run_name", "suite", "results_path", "data_dir", "progress", "save_dir")
# where notebook suites run: the Nvidia notebook (CUDA, else the CPU) in .venv, or the Trainium notebook
# (NeuronCores in .venv-neuron, else XLA on the CPU in .venv-xla); suites naming the Trainium notebook keep it
TARGETS = {"nvidia": ("Nvidia/baseline.ipynb", "main"), "trainium": ("Trainium/baseline.ipynb", "xla")}


@dataclass
class Suite:
    """A parsed suite file: what to run, where, and how the report tabulates it."""

    name: str
    title: str
    order: int
    kind: str
    notebook: str | None
    env: str
    requires: str | None
    params: dict
    variants: dict
    report: dict = field(default_factory=dict)
    description: str = ""
    on_demand: bool = False
    overrides: dict = field(default_factory=dict)  # `sweep --set`: over every point's own values (new run names)


def with_overrides(suite: Suite, text: list[str], variant: str = "quick") -> Suite:
    """Return `suite` with NAME=VALUE settings (VALUE read as a TOML value, else as text) over every point,
    each point of `variant` checked with them; raise ConfigError naming a bad one."""
    overrides = {}
    for item in text:
        name, sep, value = item.partition("=")
        if not sep or name.strip() not in FIELDS:
            raise ConfigError(
                f"--set {item!r}: expected NAME=VALUE with NAME a run parameter"
                + (f" ({unknown_message(name.strip())})" if sep else "")
            )
        try:
            overrides[name.strip()] = tomllib.loads(f"v = {value}")["v"]
        except tomllib.TOMLDecodeError:
            overrides[name.strip()] = value
    changed = dataclasses.replace(suite, overrides={**suite.overrides, **overrides})
    for point in _combinations(changed, variant) if variant in suite.variants else [overrides]:
        try:
            build_args(point)
        except ConfigError as err:
            raise ConfigError(f"--set {' '.join(text)} on {suite.name} [{variant}]: {err}") from None
    return changed


@dataclass
class Point:
    """One grid point of a suite variant: its run name and the parameters the notebook gets."""

    run_name: str
    params: dict


# the keys a suite file may hold, by table, with their TOML types (an unknown key is a typo: refused, never ignored)
TOP_KEYS = {
    "title": str,
    "description": str,
    "order": int,
    "kind": str,
    "notebook": str,
    "env": str,
    "requires": str,
    "on_demand": bool,
    "params": dict,
    "quick": dict,
    "full": dict,
    "report": dict,
}
VARIANT_KEYS = {"params": dict, "grid": dict, "cases": list, "repeats": int, "timeout_s": float, "jobs": int}
REPORT_KEYS = {"table": str, "keys": list, "values": list, "trend": list, "source": str, "published": list}
TYPE_NAMES = {
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "true or false",
    dict: "a table",
    list: "a list",
}


def _check_table(where: str, table: dict, known: dict[str, type]) -> None:
    """Refuse a key of `table` outside `known` (naming the closest known one) or a value of another type."""
    for key, value in table.items():
        if key not in known:
            close = difflib.get_close_matches(key, list(known), n=1, cutoff=0.6)
            hint = f" did you mean {close[0]!r}?" if close else ""
            raise ConfigError(f"{where}: unknown key {key!r}:{hint} (known: {', '.join(known)})")
        kind = known[key]
        ok = isinstance(value, (int, float)) if kind is float else isinstance(value, kind)
        if not ok or (isinstance(value, bool) and kind is not bool):
            raise ConfigError(f"{where}: {key}={value!r} is not {TYPE_NAMES[kind]}")


def _check_variant(where: str, spec: dict) -> None:
    """Refuse a variant table's unknown keys, wrong types, and counts or timeouts out of range."""
    _check_table(where, spec, VARIANT_KEYS)
    for key in ("jobs", "repeats"):
        if spec.get(key, 1) < 1:
            raise ConfigError(f"{where}: {key}={spec[key]!r} is invalid: must be an integer >= 1")
    timeout = spec.get("timeout_s", 1)
    if not (math.isfinite(timeout) and timeout > 0):
        raise ConfigError(f"{where}: timeout_s={timeout!r} is invalid: must be a number of seconds > 0")
    for name, values in spec.get("grid", {}).items():
        if not isinstance(values, list) or not values:
            raise ConfigError(f"{where}: grid {name}={values!r} is invalid: give a non-empty list of values")
    if not all(isinstance(case, dict) for case in spec.get("cases", [])):
        raise ConfigError(f"{where}: cases must be a list of tables ({{ name = value, ... }})")


def read_toml(path: Path) -> dict:
    """Return the TOML file `path` as a dict; ConfigError naming the file when it cannot be read or parsed."""
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except OSError as err:
        raise ConfigError(f"{path}: cannot be read ({err.strerror or err})") from None
    except ValueError as err:  # tomllib.TOMLDecodeError, or bytes that are not UTF-8
        raise ConfigError(f"{path}: not valid TOML ({err})") from None


def load_suite(path: str | Path) -> Suite:
    """Return the suite in the TOML file `path`; raise ConfigError naming the file on any bad entry."""
    path = Path(path)
    raw = read_toml(path)
    _check_table(str(path), raw, TOP_KEYS)
    _check_table(f"{path} [report]", raw.get("report", {}), REPORT_KEYS)
    for variant in VARIANTS:
        if variant in raw:
            _check_variant(f"{path} [{variant}]", raw[variant])
    kind = raw.get("kind", "notebook")
    suite = Suite(
        name=path.stem,
        title=raw.get("title", path.stem),
        order=raw.get("order", 99),
        kind=kind,
        notebook=raw.get("notebook"),
        env=raw.get("env", "main"),
        requires=raw.get("requires"),
        params=raw.get("params", {}),
        variants={v: raw[v] for v in VARIANTS if v in raw},
        report=raw.get("report", {}),
        description=raw.get("description", ""),
        on_demand=raw.get("on_demand", False),
    )
    if kind not in KINDS:
        raise ConfigError(f"{path}: kind={kind!r} is unknown: allowed {', '.join(KINDS)}")
    if suite.requires not in REQUIRES:
        raise ConfigError(
            f"{path}: requires={suite.requires!r} is unknown: allowed {', '.join(r for r in REQUIRES if r)}"
        )
    if suite.env not in ENVS:
        raise ConfigError(f"{path}: env={suite.env!r} is unknown: allowed {', '.join(ENVS)}")
    if kind == "notebook" and not suite.notebook:
        raise ConfigError(f'{path}: a notebook suite needs notebook = "Nvidia/baseline.ipynb" or similar')
    if kind != "derived" and set(suite.variants) != set(VARIANTS):
        raise ConfigError(f"{path}: needs both [quick] and [full] tables")
    for variant in suite.variants:
        for point in _combinations(suite, variant):
            unknown = sorted(set(point) - set(FIELDS))
            if unknown:
                raise ConfigError(f"{path} [{variant}]: {unknown_message(unknown[0])}")
            if kind == "notebook":
                try:
                    build_args(point)  # the one place parameters are checked
                except ConfigError as err:
                    raise ConfigError(f"{path} [{variant}]: {err}") from None
    return suite


def read_suites(suites_dir: str | Path = SUITES_DIR) -> tuple[list[Suite], dict[str, str]]:
    """Return every suite in `suites_dir` that reads, in the report's order, and why each other file does not."""
    found, broken = [], {}
    for path in sorted(repo_path(suites_dir).glob("*.toml")):
        try:
            found.append(load_suite(path))
        except ConfigError as err:
            broken[str(path)] = str(err)
    return sorted(found, key=lambda s: (s.order, s.name)), broken


def find_suites(suites_dir: str | Path = SUITES_DIR) -> list[Suite]:
    """Return every suite in `suites_dir` that reads, in the report's order; a broken file is named on stderr
    and skipped, so one typo never stops the report or `sweep all`."""
    found, broken = read_suites(suites_dir)
    for path, why in broken.items():
        print(f"skipped suite file {path}: {why}", file=sys.stderr)
    return found


def suites_folder(text: str) -> str:
    """Return `text` (a --suites-dir value) when it names a folder holding suite files; argparse's error
    otherwise: a mistyped folder would make the report, the decision and `sweep all` read no suite at all."""
    folder = repo_path(text)
    if not folder.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: no such folder of suite files (the suites: {SUITES_DIR})")
    if not any(folder.glob("*.toml")):
        raise argparse.ArgumentTypeError(f"{text}: holds no suite file (*.toml)")
    return text


def resolve_suite(name: str, suites_dir: str | Path = SUITES_DIR) -> Suite:
    """Return the suite called `name` in `suites_dir`, or the one in the file `name` ends in .toml."""
    path = Path(name) if name.endswith(".toml") else repo_path(suites_dir) / f"{name}.toml"
    if not path.exists():
        known = ", ".join(s.name for s in read_suites(suites_dir)[0])
        raise SystemExit(f"no suite {name!r} ({path} does not exist); known: {known}, or all")
    return load_suite(path)


def _combinations(suite: Suite, variant: str) -> list[dict]:
    """Return the parameter dicts of a variant: shared params, variant params, each case x grid."""
    spec = suite.variants.get(variant, {})
    base = {**suite.params, **spec.get("params", {})}
    grid = spec.get("grid", {})
    combos = [dict(zip(grid, values)) for values in itertools.product(*grid.values())]
    return [{**base, **case, **combo, **suite.overrides} for case in spec.get("cases", [{}]) for combo in combos]


def run_name(suite: str, variant: str, params: dict, varying: list[str]) -> str:
    """Return `<suite>-<variant>-<k=v,...>-<hash>`: the grid values, then a hash of every parameter."""
    label = ",".join(f"{k}={params[k]}" for k in varying) or "point"
    digest = hashlib.sha1(
        json.dumps({k: v for k, v in params.items() if k not in WHERE}, sort_keys=True, default=str).encode()
    ).hexdigest()[:6]
    return f"{suite}-{variant}-{label}-{digest}".replace("/", "_").replace(" ", "")


def repeat_name(name: str, repeat: int) -> str:
    """Return the run name of a point's `repeat`-th independent run (the first keeps the point's name)."""
    return name if repeat == 1 else f"{name}-rep{repeat}"


def timeout_of(suite: Suite, variant: str) -> float:
    """Return the seconds one point of `suite`'s `variant` may run before the sweep kills it."""
    return suite.variants.get(variant, {}).get("timeout_s", DEFAULT_TIMEOUT_S)


def expand(suite: Suite, variant: str) -> list[Point]:
    """Return the points of `suite`'s `variant`, repeat by repeat, each with its run name (none if derived)."""
    if suite.kind == "derived":
        return []
    if variant not in suite.variants:
        raise ConfigError(f"suite {suite.name} has no [{variant}] table")
    combos = _combinations(suite, variant)
    names = list(dict.fromkeys(k for c in combos for k in c))  # every name, in first-seen order
    varying = [k for k in names if len({json.dumps(c.get(k), default=str) for c in combos}) > 1]
    cells = [(run_name(suite.name, variant, c, [k for k in varying if k in c]), c) for c in combos]
    repeats = suite.variants[variant].get("repeats", 1)
    return [Point(repeat_name(name, r), params) for r in range(1, repeats + 1) for name, params in cells]


def xla_env() -> str:
    """Return the Trainium notebook's environment: neuron where .venv-neuron exists (a trn1), else xla."""
    return "neuron" if (repo_path(ENVS["neuron"][0]) / "bin" / "python").exists() else "xla"


def retarget(suite: Suite, target: str) -> Suite:
    """Return `suite` as run on `target`: trainium moves Nvidia-notebook suites to the Trainium notebook; a
    suite in the XLA environment runs in the Neuron one where that exists."""
    if target not in TARGETS:
        raise ConfigError(f"target={target!r} is unknown: allowed {', '.join(TARGETS)}")
    if target == "trainium" and suite.kind == "notebook" and suite.notebook == TARGETS["nvidia"][0]:
        notebook, env = TARGETS[target]
        # device=xla is the Trainium notebook's default; naming it gives these points their own run names
        suite = dataclasses.replace(suite, notebook=notebook, env=env, params={**suite.params, "device": "xla"})
    if suite.env == "xla" and xla_env() != "xla":
        suite = dataclasses.replace(suite, env=xla_env())
    return suite
