"""Suite files (Experiment/suites/<name>.toml, one per report table), checked and expanded into named points."""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import hashlib
import itertools
import json
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal

import pydantic

from helpers.run.args import FIELDS, ConfigError, build_args, unknown_message
from helpers.run.paths import repo_path

SUITES_DIR = "Experiment/suites"
VARIANTS = ("quick", "full")
DEFAULT_TIMEOUT_S = 1800  # a point's limit where its suite variant gives no timeout_s
# folder, Jupyter kernel; "neuron" (`make neuron-venv`, trn1 only) stands in for "xla" where it exists
ENVS = {
    "main": (".venv", "accelbench"),
    "xla": (".venv-xla", "accelbench-xla"),
    "neuron": (".venv-neuron", "accelbench-neuron"),
}
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
    """Return `suite` with NAME=VALUE settings (TOML values, else text) over every point of `variant`, checked."""
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


ALLOWED = {"kind": ("notebook", "token_stats", "derived"), "env": tuple(ENVS), "requires": ("neuron", "fast-bf16")}
TYPE_NAMES = {
    "string_type": "a string",
    "int_type": "an integer",
    "float_type": "a number",
    "bool_type": "true or false",
    "dict_type": "a table",
    "model_type": "a table",
    "list_type": "a list",
}
RANGES = {"repeats": "an integer >= 1", "jobs": "an integer >= 1", "timeout_s": "a number of seconds > 0"}


class _Table(pydantic.BaseModel):
    """A table of a suite file: an unknown key is a typo, refused, never ignored; TOML types, strictly."""

    model_config = pydantic.ConfigDict(extra="forbid", strict=True)


class Variant(_Table):
    """A suite's [quick] or [full] table."""

    params: dict = {}
    grid: dict[str, Annotated[list, pydantic.Field(min_length=1)]] = {}  # every combination
    cases: list[dict] = []  # explicit points, each crossed with the grid
    repeats: int = pydantic.Field(1, ge=1)  # independent processes per point
    timeout_s: float = pydantic.Field(DEFAULT_TIMEOUT_S, gt=0, allow_inf_nan=False)  # a point's limit
    jobs: int = pydantic.Field(1, ge=1)  # points run at once, each on cpu_count / jobs threads


class Report(_Table):
    """A suite's [report] table: how helpers.study.report.tables tabulates its records."""

    table: str | None = None
    keys: list = []
    values: list = []
    trend: list = []
    source: str | None = None
    published: list = []


class SuiteFile(_Table):
    """A suite file as written (Experiment/suites/<name>.toml)."""

    title: str | None = None  # default: the file's name
    description: str = ""
    order: int = 99  # its place in the report
    kind: Literal[ALLOWED["kind"]] = "notebook"
    notebook: str | None = None
    env: Literal[ALLOWED["env"]] = "main"
    # neuron: torch-neuronx; fast-bf16: a GPU, trn1 or a CPU with fast bf16
    requires: Literal[ALLOWED["requires"]] | None = None
    on_demand: bool = False  # true: `sweep all` (and so `make report`) leaves it out; it runs by name
    params: dict = {}  # the run's parameters (helpers/run/args.py); "None" stands for None (TOML has no null)
    quick: Variant | None = None
    full: Variant | None = None
    report: Report = Report()


def _problem(path: Path, error: dict) -> str:
    """Return a suite file's first validation error in words, naming the file, the table and the key."""
    loc, value = error["loc"], error["input"]
    where = f"{path} [{loc[0]}]" if len(loc) > 1 else str(path)
    key = loc[-1] if len(loc) < 3 else loc[1]
    if error["type"] == "extra_forbidden":
        table = SuiteFile if len(loc) == 1 else Report if loc[0] == "report" else Variant
        known = list(table.model_fields)
        close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
        hint = f" did you mean {close[0]!r}?" if close else ""
        return f"{where}: unknown key {key!r}:{hint} (known: {', '.join(known)})"
    if key == "grid" and len(loc) == 3:
        return f"{where}: grid {loc[2]}={value!r} is invalid: give a non-empty list of values"
    if key == "cases" and len(loc) == 3:
        return f"{where}: cases must be a list of tables ({{ name = value, ... }})"
    if error["type"] == "literal_error":
        return f"{where}: {key}={value!r} is unknown: allowed {', '.join(ALLOWED[key])}"
    if error["type"] in TYPE_NAMES:
        return f"{where}: {key}={value!r} is not {TYPE_NAMES[error['type']]}"
    return f"{where}: {key}={value!r} is invalid: must be {RANGES[key]}"


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
    try:
        f = SuiteFile.model_validate(raw)
    except pydantic.ValidationError as err:
        raise ConfigError(_problem(path, err.errors()[0])) from None
    suite = Suite(
        name=path.stem,
        title=f.title or path.stem,
        order=f.order,
        kind=f.kind,
        notebook=f.notebook,
        env=f.env,
        requires=f.requires,
        params=f.params,
        variants={v: raw[v] for v in VARIANTS if v in raw},
        report=raw.get("report", {}),
        description=f.description,
        on_demand=f.on_demand,
    )
    if f.kind == "notebook" and not f.notebook:
        raise ConfigError(f'{path}: a notebook suite needs notebook = "Nvidia/baseline.ipynb" or similar')
    if f.kind != "derived" and set(suite.variants) != set(VARIANTS):
        raise ConfigError(f"{path}: needs both [quick] and [full] tables")
    for variant in suite.variants:
        for point in _combinations(suite, variant):
            unknown = sorted(set(point) - set(FIELDS))
            if unknown:
                raise ConfigError(f"{path} [{variant}]: {unknown_message(unknown[0])}")
            if f.kind == "notebook":
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
    """Return every suite in `suites_dir` that reads, in the report's order; name each broken file on stderr."""
    found, broken = read_suites(suites_dir)
    for path, why in broken.items():
        print(f"skipped suite file {path}: {why}", file=sys.stderr)
    return found


def suites_folder(text: str) -> str:
    """Return `text` (a --suites-dir value) when it names a folder of suite files; else argparse's error."""
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
    """Return `<suite>-<variant>-<k=v,...>-<hash>`: one point, one name; an edited parameter, a new name."""
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
    """Return the points of `suite`'s `variant` with their run names (none if derived), repeat by repeat."""
    if suite.kind == "derived":
        return []
    if variant not in suite.variants:
        raise ConfigError(f"suite {suite.name} has no [{variant}] table")
    combos = _combinations(suite, variant)
    names = list(dict.fromkeys(k for c in combos for k in c))  # every name, in first-seen order
    varying = [k for k in names if len({json.dumps(c.get(k), default=str) for c in combos}) > 1]
    cells = [(run_name(suite.name, variant, c, [k for k in varying if k in c]), c) for c in combos]
    repeats = suite.variants[variant].get("repeats", 1)
    # every cell once, then every cell again: a cell's repeats spread over the sweep, their spread between runs
    return [Point(repeat_name(name, r), params) for r in range(1, repeats + 1) for name, params in cells]


def xla_env() -> str:
    """Return the Trainium notebook's environment: neuron where .venv-neuron exists (a trn1), else xla."""
    return "neuron" if (repo_path(ENVS["neuron"][0]) / "bin" / "python").exists() else "xla"


def retarget(suite: Suite, target: str) -> Suite:
    """Return `suite` as run on `target` (trainium: through the Trainium notebook; xla: neuron where it exists)."""
    if target not in TARGETS:
        raise ConfigError(f"target={target!r} is unknown: allowed {', '.join(TARGETS)}")
    if target == "trainium" and suite.kind == "notebook" and suite.notebook == TARGETS["nvidia"][0]:
        notebook, env = TARGETS[target]
        # device=xla is the Trainium notebook's default; naming it gives these points their own run names
        suite = dataclasses.replace(suite, notebook=notebook, env=env, params={**suite.params, "device": "xla"})
    if suite.env == "xla" and xla_env() != "xla":
        suite = dataclasses.replace(suite, env=xla_env())
    return suite
