"""Suite files (Experiment/suites/<name>.toml, one per report table), checked and expanded into named points.

A point is named `<suite>-<variant>-<k=v,...>-<hash>` (`-repN` for its N-th independent run), the hash taken over
its parameters. `sweep --set NAME=VALUE` puts a value over every point and appends it to the point's name:
`<point name>+NAME=VALUE,...`. Such a run is still that point of the suite, with one setting changed:
`point_of(run_name)` gives the point a record belongs to, which is how the report counts it (points the override
makes identical are run once, under the first one's name).
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import hashlib
import itertools
import json
import re
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal

import pydantic

from helpers import arguments
from helpers.record import repo_path

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
SWEEPS = ("run_name", "suite", "results_path")  # the sweep sets these for every point: a suite never does
# where notebook suites run: the Nvidia notebook (CUDA, else the CPU) in .venv, or the Trainium notebook
# (NeuronCores in .venv-neuron, else XLA on the CPU in .venv-xla); suites naming the Trainium notebook keep it
TARGETS = {"nvidia": ("Nvidia/baseline.ipynb", "main"), "trainium": ("Trainium/baseline.ipynb", "xla")}
# the Trainium loop's points were named with device="xla" when both loops took one argument class; the hash keeps
# it, so the records of those points stay theirs
TRAINIUM_NAMED = {"device": "xla"}


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
    overrides: dict = field(default_factory=dict)  # `sweep --set`: over every point's own values, named apart


@dataclass
class Point:
    """One grid point of a suite variant: its run name and the parameters the notebook gets."""

    run_name: str
    params: dict


class _Table(pydantic.BaseModel):
    """A table of a suite file: an unknown key is a typo, refused, never ignored; TOML types, strictly."""

    model_config = pydantic.ConfigDict(extra="forbid", strict=True)


class Variant(_Table):
    """A suite's [quick] or [full] table."""

    params: dict = {}
    grid: dict[str, Annotated[list, pydantic.Field(min_length=1)]] = {}  # every combination
    cases: list[dict] = pydantic.Field([{}], min_length=1)  # explicit points, each crossed with the grid
    repeats: int = pydantic.Field(1, ge=1)  # independent processes per point
    timeout_s: float = pydantic.Field(DEFAULT_TIMEOUT_S, gt=0, allow_inf_nan=False)  # a point's limit
    jobs: int = pydantic.Field(1, ge=1)  # points run at once, each on cpu_count / jobs threads


class Report(_Table):
    """A suite's [report] table: how study.report tabulates its records."""

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
    kind: Literal["notebook", "token_stats", "derived"] = "notebook"
    notebook: str | None = None
    env: Literal[tuple(ENVS)] = "main"
    # neuron: torch-neuronx; fast-bf16: a GPU, trn1 or a CPU with fast bf16
    requires: Literal["neuron", "fast-bf16"] | None = None
    on_demand: bool = False  # true: `sweep all` (and so `make report`) leaves it out; it runs by name
    params: dict = {}  # the run's parameters (helpers/arguments.py); "None" stands for None (TOML has no null)
    quick: Variant | None = None
    full: Variant | None = None
    report: Report = Report()


def _problem(path: Path, error: dict) -> str:
    """Return a suite file's first validation error in words, naming the file, the table and the key."""
    loc = [str(part) for part in error["loc"]]
    where = f"{path} [{loc[0]}]" if len(loc) > 1 else str(path)
    if error["type"] == "extra_forbidden":
        table = SuiteFile if len(loc) == 1 else Report if loc[0] == "report" else Variant
        close = difflib.get_close_matches(loc[-1], list(table.model_fields), n=1, cutoff=0.6)
        hint = f" did you mean {close[0]!r}?" if close else ""
        return f"{where}: unknown key {loc[-1]!r}:{hint} (known: {', '.join(table.model_fields)})"
    return f"{where}: {' '.join(loc[1:] or loc)}={error['input']!r} is invalid: {error['msg']}"


def read_toml(path: Path) -> dict:
    """Return the TOML file `path` as a dict; ConfigError naming the file when it cannot be read or parsed."""
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except OSError as err:
        raise arguments.ConfigError(f"{path}: cannot be read ({err.strerror or err})") from None
    except ValueError as err:  # tomllib.TOMLDecodeError, or bytes that are not UTF-8
        raise arguments.ConfigError(f"{path}: not valid TOML ({err})") from None


def platform(suite: Suite) -> type[arguments.Args]:
    """Return the argument class of the loop a suite's notebook runs (the Nvidia loop's unless Trainium's)."""
    return arguments.PLATFORMS["trainium" if suite.notebook == TARGETS["trainium"][0] else "nvidia"]


def check(suite: Suite, where: str, variants: tuple[str, ...] = VARIANTS) -> None:
    """Refuse a suite whose points the loop's argument class would refuse; ConfigError naming `where`."""
    for variant in (v for v in variants if v in suite.variants):
        for point in expand(suite, variant):
            given = set(point.params) & set(SWEEPS)
            if given:
                raise arguments.ConfigError(
                    f"{where} [{variant}]: {sorted(given)[0]} is set by the sweep for every point"
                )
            if suite.kind != "derived":
                try:  # the one place parameters are checked; the run name with them (it becomes a file name)
                    arguments.build({**point.params, "run_name": point.run_name, "suite": suite.name}, platform(suite))
                except arguments.ConfigError as err:
                    raise arguments.ConfigError(f"{where} [{variant}]: {err}") from None


def load_suite(path: str | Path) -> Suite:
    """Return the suite in the TOML file `path`; raise ConfigError naming the file on any bad entry."""
    path = Path(path)
    raw = read_toml(path)
    try:
        f = SuiteFile.model_validate(raw)
    except pydantic.ValidationError as err:
        raise arguments.ConfigError(_problem(path, err.errors()[0])) from None
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
        report=f.report.model_dump(),
        description=f.description,
        on_demand=f.on_demand,
    )
    if f.kind == "notebook" and not f.notebook:
        raise arguments.ConfigError(f'{path}: a notebook suite needs notebook = "Nvidia/baseline.ipynb" or similar')
    if f.kind != "derived" and set(suite.variants) != set(VARIANTS):
        raise arguments.ConfigError(f"{path}: needs both [quick] and [full] tables")
    check(suite, str(path))
    return suite


def read_suites(suites_dir: str | Path = SUITES_DIR) -> tuple[list[Suite], dict[str, str]]:
    """Return every suite in `suites_dir` that reads, in the report's order, and why each other file does not."""
    found, broken = [], {}
    for path in sorted(repo_path(suites_dir).glob("*.toml")):
        try:
            found.append(load_suite(path))
        except arguments.ConfigError as err:
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
    return [{**base, **case, **combo} for case in spec.get("cases", [{}]) for combo in combos]


def label(params: dict) -> str:
    """Return `k=v,...` as a run name carries it: no slash, space or plus (a plus opens the overrides)."""
    return re.sub(r"[/+]", "_", ",".join(f"{k}={v}" for k, v in params.items()).replace(" ", ""))


def run_name(suite: str, variant: str, params: dict, varying: list[str], trainium: bool = False) -> str:
    """Return `<suite>-<variant>-<k=v,...>-<hash>`: one point, one name; an edited parameter, a new name."""
    named = {**params, **TRAINIUM_NAMED} if trainium else params
    digest = hashlib.sha1(
        json.dumps({k: v for k, v in named.items() if k not in WHERE}, sort_keys=True, default=str).encode()
    ).hexdigest()[:6]
    return f"{suite}-{variant}-{label({k: params[k] for k in varying}) or 'point'}-{digest}"


def repeat_name(name: str, repeat: int) -> str:
    """Return the run name of a point's `repeat`-th independent run (the first keeps the point's name)."""
    return name if repeat == 1 else f"{name}-rep{repeat}"


def point_of(name: str) -> str:
    """Return the suite point a run name belongs to: the name without its `+NAME=VALUE` overrides."""
    return name.partition("+")[0]


def timeout_of(suite: Suite, variant: str) -> float:
    """Return the seconds one point of `suite`'s `variant` may run before the sweep kills it."""
    return suite.variants.get(variant, {}).get("timeout_s", DEFAULT_TIMEOUT_S)


def expand(suite: Suite, variant: str) -> list[Point]:
    """Return the points of `suite`'s `variant` with their run names (none if derived), repeat by repeat."""
    if suite.kind == "derived":
        return []
    if variant not in suite.variants:
        raise arguments.ConfigError(f"suite {suite.name} has no [{variant}] table")
    combos = _combinations(suite, variant)
    names = list(dict.fromkeys(k for c in combos for k in c))  # every name, in first-seen order
    varying = [k for k in names if len({json.dumps(c.get(k), default=str) for c in combos}) > 1]
    trainium = platform(suite) is arguments.TrainiumArgs
    cells = {}  # the parameters run -> the name; points an override makes one are run once
    for c in combos:
        name = run_name(suite.name, variant, c, [k for k in varying if k in c], trainium)
        cells.setdefault(json.dumps({**c, **suite.overrides}, sort_keys=True, default=str), (name, c))
    suffix = f"+{label(suite.overrides)}" if suite.overrides else ""
    repeats = suite.variants[variant].get("repeats", 1)
    # every cell once, then every cell again: a cell's repeats spread over the sweep, their spread between runs
    return [
        Point(repeat_name(name, r) + suffix, {**params, **suite.overrides})
        for r in range(1, repeats + 1)
        for name, params in cells.values()
    ]


def with_overrides(suite: Suite, settings: list[str], variant: str) -> Suite:
    """Return `suite` with NAME=VALUE settings (TOML values, else text) over every point of `variant`, checked."""
    overrides = {}
    for item in settings:
        name, sep, value = (part.strip() for part in item.partition("="))
        if not sep or name not in platform(suite).__dataclass_fields__:
            why = f" ({arguments.unknown_message(name, platform(suite))})" if sep else ""
            raise arguments.ConfigError(f"--set {item!r}: expected NAME=VALUE with NAME a run parameter{why}")
        if name in SWEEPS:
            raise arguments.ConfigError(
                f"--set {item!r}: {name} is set by the sweep for every point (--results for the folder)"
            )
        try:
            overrides[name] = tomllib.loads(f"v = {value}")["v"]
        except tomllib.TOMLDecodeError:
            overrides[name] = value
    if not overrides or suite.kind == "derived":
        return suite
    changed = dataclasses.replace(suite, overrides={**suite.overrides, **overrides})
    check(changed, f"--set {' '.join(settings)} on {suite.name}", (variant,))
    return changed


def xla_env() -> str:
    """Return the Trainium notebook's environment: neuron where .venv-neuron exists (a trn1), else xla."""
    return "neuron" if (repo_path(ENVS["neuron"][0]) / "bin" / "python").exists() else "xla"


def retarget(suite: Suite, target: str) -> Suite:
    """Return `suite` as run on `target` (trainium: through the Trainium notebook; xla: neuron where it exists)."""
    if target not in TARGETS:
        raise arguments.ConfigError(f"target={target!r} is unknown: allowed {', '.join(TARGETS)}")
    if target == "trainium" and suite.kind == "notebook" and suite.notebook == TARGETS["nvidia"][0]:
        notebook, env = TARGETS[target]
        suite = dataclasses.replace(suite, notebook=notebook, env=env)
        check(suite, f"{suite.name} on the trainium target")
    if suite.env == "xla" and xla_env() != "xla":
        suite = dataclasses.replace(suite, env=xla_env())
    return suite
