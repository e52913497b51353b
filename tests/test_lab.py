"""Both notebooks as a user runs them in JupyterLab: a real server on localhost, each notebook opened in headless
Chromium on its named kernel, Run > Run All Cells, and what the loop printed read off the page.

The notebook opened is the repository's, with tiny offline settings injected below its parameters cell by
`papermill --prepare-only` (not executed: the browser runs it); the Nvidia test also edits a parameter in the
browser and checks that the run used it. Needs jupyterlab and selenium (requirements.txt) and Debian's chromium
and chromium-driver (`make browser` installs them where it runs as root); skipped, saying which is missing,
elsewhere. Screenshots go to tests/artifacts/ (gitignored).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from helpers import record

REPO = Path(__file__).resolve().parent.parent
ARTIFACTS = REPO / "tests" / "artifacts"
CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
RUN_TIMEOUT_S = 900  # Run All on the tiny settings: about a minute here, far longer on a loaded 2-core machine
pytestmark = pytest.mark.slow


def skip_unless_browser() -> None:
    """Skip, saying what is missing, where selenium, Chromium or its driver is not here."""
    pytest.importorskip("selenium", reason="selenium is not installed (requirements.txt; `make venv`)")
    for path, package in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if path is None:
            pytest.skip(f"{package} not found: install Debian's {package} (`make browser` does, as root)")


def skip_unless_kernel(kernel: str) -> None:
    """Skip, saying why, where JupyterLab from this environment cannot start `kernel`."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        spec = KernelSpecManager().get_kernel_spec(kernel)
    except NoSuchKernel:
        pytest.skip(f"kernel {kernel} is not registered in {sys.prefix} (`make lab` registers it)")
    if not Path(spec.argv[0]).exists():
        pytest.skip(f"kernel {kernel} runs {spec.argv[0]}, which does not exist (rebuild its environment)")


class Lab:
    """`jupyter lab` on 127.0.0.1 with a token, no browser, in a temporary root and config folder."""

    def __init__(self, root: Path, home: Path) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.root, self.token, self.url = root, secrets.token_hex(16), f"http://127.0.0.1:{port}"
        settings = home / "settings" / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
        settings.parent.mkdir(parents=True)  # the first launch's news and update pop-ups would cover the page
        settings.write_text(json.dumps({"fetchNews": "false", "checkForUpdates": False}))
        env = dict(
            os.environ,
            JUPYTER_CONFIG_DIR=str(home / "config"),
            JUPYTER_RUNTIME_DIR=str(home / "runtime"),
            JUPYTERLAB_SETTINGS_DIR=str(home / "settings"),
            JUPYTERLAB_WORKSPACES_DIR=str(home / "workspaces"),
            PYTHONPATH=os.pathsep.join(filter(None, (str(REPO), os.environ.get("PYTHONPATH")))),  # this checkout
        )
        command = [
            sys.executable,
            "-m",
            "jupyterlab",
            "--no-browser",
            "--ip=127.0.0.1",
            f"--port={port}",
            "--port-retries=0",
            f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={root}",
        ]
        self.log = open(home / "server.log", "w")
        self.proc = subprocess.Popen(
            command + (["--allow-root"] if os.geteuid() == 0 else []),  # CI runs as root
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        try:
            poll(self.answers, 120, "jupyter lab to answer")
        except BaseException:
            self.stop()
            raise

    def answers(self) -> bool:
        assert self.proc.poll() is None, f"jupyter lab exited: {Path(self.log.name).read_text()[-3000:]}"
        try:
            return urllib.request.urlopen(f"{self.url}/api/status?token={self.token}", timeout=5).status == 200
        except OSError:
            return False

    def stop(self) -> None:
        """Stop the server (it shuts its kernels down), then whatever of its kernels is left."""
        import psutil

        kernels = psutil.Process(self.proc.pid).children(recursive=True) if self.proc.poll() is None else []
        self.proc.terminate()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        for kernel in kernels:
            with contextlib.suppress(psutil.NoSuchProcess):
                kernel.kill()
        self.log.close()


def poll(ready, timeout_s: float, what: str):
    """Return `ready()`'s first truthy value, asked every second; fail after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not (value := ready()):
        assert time.monotonic() < deadline, f"waited {timeout_s:.0f} s for {what}"
        time.sleep(1)
    return value


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    skip_unless_browser()
    server = Lab(tmp_path_factory.mktemp("lab-root"), tmp_path_factory.mktemp("lab-home"))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def browser(lab):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1400,1600",
    ):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(120)
    yield driver
    driver.quit()


def prepare(notebook: str, lab: Lab, **params) -> Path:
    """Copy `notebook` into the server's root at the same place, `params` injected below its parameters cell."""
    import papermill

    out = lab.root / notebook
    out.parent.mkdir(exist_ok=True)
    papermill.execute_notebook(REPO / notebook, out, parameters=params, prepare_only=True, progress_bar=False)
    return out


def texts(element, css: str) -> list[str]:
    return [e.get_attribute("textContent") for e in element.find_elements("css selector", css)]


def run_all(driver, lab: Lab, notebook: Path, kernel_name: str, edit: str = "") -> str:
    """Open `notebook`, check its kernel, type `edit` at the end of the injected parameters cell, Run > Run All
    Cells; return the cells' output text once the last cell ran (or one failed)."""
    from selenium.webdriver.common.keys import Keys

    sources = ["".join(c["source"]) for c in json.loads(notebook.read_text())["cells"] if c["cell_type"] == "code"]
    find = lambda: driver.find_elements("css selector", ".jp-NotebookPanel .jp-CodeCell")  # noqa: E731
    workspace = notebook.parent.name.lower()  # a workspace of its own: no tab of an earlier test restored
    driver.get(f"{lab.url}/lab/workspaces/{workspace}/tree/{notebook.relative_to(lab.root)}?token={lab.token}")
    cells = poll(lambda: len(find()) == len(sources) and find(), 120, f"the notebook's {len(sources)} code cells")
    try:
        # the kernel JupyterLab started from the notebook's kernelspec, by its display name, and idle
        poll(lambda: f"{kernel_name} | Idle" in "".join(texts(driver, ".jp-StatusBar-Widget")), 180, "the kernel")
        assert not texts(driver, ".jp-Dialog"), f"JupyterLab asked: {texts(driver, '.jp-Dialog')}"
        if edit:
            editor = cells[1].find_element("css selector", ".cm-content")  # papermill's cell below the parameters
            assert "# Parameters" in editor.get_attribute("textContent")
            editor.click()
            editor.send_keys(Keys.CONTROL, Keys.END)
            editor.send_keys(Keys.ENTER, edit, Keys.ESCAPE)
            assert edit in editor.get_attribute("textContent")
        driver.find_element("xpath", "//li[contains(@class,'lm-MenuBar-item')][.//*[text()='Run']]").click()
        item = "//li[contains(@class,'lm-Menu-item')][div[normalize-space()='Run All Cells']]"
        poll(lambda: driver.find_elements("xpath", item), 30, "the Run menu")[0].click()

        def outputs() -> str:
            return "\n".join(" ".join(texts(cell, ".jp-OutputArea-output")) for cell in cells)

        def done() -> bool:  # the last cell drew its curves, or a cell failed, or the kernel died (a dialog says)
            curves = cells[-1].find_elements("css selector", ".jp-OutputArea-output img")
            return bool(curves) or "Traceback (most recent" in outputs() or bool(texts(driver, ".jp-Dialog"))

        poll(done, RUN_TIMEOUT_S, "Run All Cells to draw the curves")
        assert "Traceback" not in outputs() and not texts(driver, ".jp-Dialog"), outputs()[-3000:]
        return outputs()
    finally:
        ARTIFACTS.mkdir(exist_ok=True)
        train_cell = next(i for i, source in enumerate(sources) if "train.train(" in source)
        for name, cell in (("train", cells[train_cell]), ("end", cells[-1])):  # the loop's lines, the curves
            driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", cell)
            driver.save_screenshot(str(ARTIFACTS / f"lab-{workspace}-{name}.png"))


def test_nvidia_notebook_runs_all_cells_with_a_parameter_edited_in_the_browser(
    lab, browser, tiny_model_dir, tiny_data_dir, tmp_path
):
    skip_unless_kernel("accelbench")
    results = tmp_path / "results"
    notebook = prepare(
        "Nvidia/baseline.ipynb",
        lab,
        model_name=str(tiny_model_dir),
        data_dir=str(tiny_data_dir),
        results_path=str(results),
        batch=64,
        max_length=32,
        epochs=1,
        log_every=2,
        timing_warmup_steps=2,
        progress=False,
        run_name="lab-test",
    )
    # the user's edit: batch 64 (injected) becomes 32, so the 256 generated rows take 8 steps, not 4
    text = run_all(browser, lab, notebook, "accelbench (CPU / CUDA)", edit="batch = 32")
    assert "TqdmWarning" not in text
    assert "train: step 8/8, loss" in text and "record: finished, written to" in text
    assert "device busy share: " in text and "optimizer steps by batch x length: " in text
    (rec,), skipped = record.read(results)
    assert not skipped and rec["status"] == "finished" and rec["run_name"] == "lab-test"
    assert rec["params"]["batch"] == 32 and rec["device"]["type"] == "cpu"


def test_trainium_notebook_runs_all_cells_on_the_xla_kernel(lab, browser, tiny_model_dir, tiny_data_dir, tmp_path):
    skip_unless_kernel("accelbench-xla")
    results = tmp_path / "results"
    # two warm-up steps: XLA compiles the first step's graph and the steady one
    notebook = prepare(
        "Trainium/baseline.ipynb",
        lab,
        model_name=str(tiny_model_dir),
        data_dir=str(tiny_data_dir),
        results_path=str(results),
        batch=16,
        max_length=32,
        max_steps=6,
        log_every=2,
        timing_warmup_steps=2,
        progress=False,
        xla_fast_compile=True,
        run_name="lab-test-xla",
    )
    text = run_all(browser, lab, notebook, "accelbench-xla (torch-xla)")
    assert "NEURON_CC_FLAGS = " in text and "train: step 6/6, loss" in text and "record: finished, written to" in text
    assert "graphs compiled at steps {" in text and "; after the warm-up: 0\n" in text  # none in the steady steps
    (rec,), skipped = record.read(results)
    assert not skipped and rec["status"] == "finished" and rec["device"]["type"] == "xla"
