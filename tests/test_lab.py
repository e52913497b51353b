"""JupyterLab as the study's users work in it: a real server on localhost, each notebook opened in headless
Chromium on its named kernel, Run > Run All Cells, and the summary cell's output read off the page.

The notebook opened is the repository's, with the offline tiny settings injected below its parameters
cell by `papermill --prepare-only` (not executed: the browser runs it); the Nvidia test also edits a
parameter in the browser, as a user would, and checks that the run used it. Needs jupyterlab and selenium
(requirements.txt) and Debian's chromium and chromium-driver (`make browser` installs them where it runs as
root); skipped, saying which is missing, elsewhere. Screenshots go to tests/artifacts/ (gitignored).
"""

from __future__ import annotations

import importlib.util
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from helpers.run import records

REPO = Path(__file__).resolve().parent.parent
ARTIFACTS = REPO / "tests" / "artifacts"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
RUN_TIMEOUT_S = 420  # Run All on the tiny settings takes ~30 s (CPU) and ~45 s (XLA-CPU) on 2 cores
pytestmark = pytest.mark.slow

# First-launch pop-ups a new user would dismiss (news opt-in, update check): they would cover the page.
LAB_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false", "checkForUpdates": False}
}


def missing_reason() -> str | None:
    """Return why the browser test cannot run here, or None."""
    for module in ("jupyterlab", "selenium"):
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed in {sys.prefix} (requirements.txt; `make venv`)"
    for path, package in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not os.access(path, os.X_OK):
            return f"{path} not found: install Debian's {package} (`make browser` does, as root)"
    return None


def kernel_missing_reason(name: str) -> str | None:
    """Return why JupyterLab from this environment cannot start kernel `name`, or None."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        spec = KernelSpecManager().get_kernel_spec(name)
    except NoSuchKernel:
        target = {"accelbench": "make venv", "accelbench-xla": "make xla-venv"}.get(name, "make neuron-venv")
        return f"kernel {name} is not registered in {sys.prefix} (`{target}` registers it)"
    if not Path(spec.argv[0]).exists():
        return f"kernel {name} points at {spec.argv[0]}, which does not exist (rebuild its environment)"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LabServer:
    """`jupyter lab` on 127.0.0.1 with a token, no browser, in a temporary root and config folder."""

    def __init__(self, root: Path, home: Path) -> None:
        self.root, self.port, self.token = root, free_port(), secrets.token_hex(16)
        settings = home / "lab-settings"
        for rel, value in LAB_SETTINGS.items():
            (settings / rel).parent.mkdir(parents=True, exist_ok=True)
            (settings / rel).write_text(json.dumps(value))
        env = dict(
            os.environ,
            JUPYTER_CONFIG_DIR=str(home / "config"),
            JUPYTER_RUNTIME_DIR=str(home / "runtime"),
            JUPYTERLAB_SETTINGS_DIR=str(settings),
            JUPYTERLAB_WORKSPACES_DIR=str(home / "workspaces"),
            PJRT_DEVICE="CPU",
            XLA_FLAGS="--xla_backend_optimization_level=0",
        )
        self.log = open(home / "server.log", "w")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "jupyterlab",
                "--no-browser",
                "--ip=127.0.0.1",
                f"--port={self.port}",
                "--port-retries=0",
                f"--IdentityProvider.token={self.token}",
                f"--ServerApp.root_dir={root}",
                *(["--allow-root"] if os.geteuid() == 0 else []),
            ],  # CI runs as root
            cwd=root,
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"jupyter lab exited {self.proc.returncode}: {self.log_tail()}")
            try:
                urllib.request.urlopen(f"{self.url}/api/status?token={self.token}", timeout=2)
                return
            except OSError:
                time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"jupyter lab did not answer in 90 s: {self.log_tail()}")

    def log_tail(self, chars: int = 3000) -> str:
        self.log.flush()
        return Path(self.log.name).read_text()[-chars:]

    def stop(self) -> None:
        """Stop the server and every kernel it started (kernels run in sessions of their own)."""
        import psutil

        try:
            children = psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            children = []
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # jupyter server shuts its kernels down, then exits
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        for child in children:
            try:
                child.kill()
            except psutil.NoSuchProcess:
                pass
        self.log.close()


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    reason = missing_reason()
    if reason:
        pytest.skip(reason)
    server = LabServer(tmp_path_factory.mktemp("lab-root"), tmp_path_factory.mktemp("lab-home"))
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
    yield driver
    driver.quit()


def prepare(notebook: str, root: Path, **params) -> Path:
    """Copy `notebook` into the server's root with `params` injected below its parameters cell."""
    out = root / f"{Path(notebook).parent.name.lower()}-tiny.ipynb"
    args = [sys.executable, "-m", "papermill", "--prepare-only", str(REPO / notebook), str(out)]
    for name, value in params.items():
        args += ["-p", name, str(value)]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out


def page_text(driver, css: str) -> list[str]:
    return [e.get_attribute("textContent") for e in driver.find_elements("css selector", css)]


def run_all_in_browser(
    driver, lab: LabServer, nb: Path, kernel_display: str, screenshot: str, typed_parameters: str = ""
) -> tuple[str, str]:
    """Open `nb`, check its kernel, type `typed_parameters` at the end of the injected parameters cell,
    Run > Run All Cells; return the summary cell's and all cells' output text."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    shot = ARTIFACTS / screenshot
    ARTIFACTS.mkdir(exist_ok=True)
    try:
        driver.get(f"{lab.url}/lab/tree/{nb.name}?token={lab.token}")
        wait = WebDriverWait(driver, 90)
        wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, ".jp-NotebookPanel .jp-CodeCell")))
        # the kernel JupyterLab picked from the notebook's kernelspec, by its display name
        wait.until(lambda d: kernel_display in " ".join(page_text(d, ".jp-NotebookPanel-toolbar")))
        dialogs = page_text(driver, ".jp-Dialog")
        assert not dialogs, f"JupyterLab asked: {dialogs}"
        if typed_parameters:
            type_at_end_of_cell(driver, "# Parameters", typed_parameters)
        driver.find_element(By.XPATH, "//li[contains(@class,'lm-MenuBar-item')][.//*[text()='Run']]").click()
        wait.until(
            EC.element_to_be_clickable(
                (By.XPATH, "//li[contains(@class,'lm-Menu-item')][div[normalize-space()='Run All Cells']]")
            )
        ).click()
        summary = ""
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while time.monotonic() < deadline:
            cells = driver.find_elements(By.CSS_SELECTOR, ".jp-NotebookPanel .jp-CodeCell")
            for cell in cells:
                source = " ".join(page_text(cell, ".jp-InputArea .cm-content"))
                if "steps.summary(record)" in source:
                    summary = " ".join(page_text(cell, ".jp-OutputArea-output"))
            outputs = " ".join(page_text(driver, ".jp-NotebookPanel .jp-OutputArea-output"))
            if "finished" in summary or "Traceback (most recent call last)" in outputs:
                break
            time.sleep(1)
        time.sleep(1)  # let the last outputs paint before the screenshots
        scroll_to(driver, "steps.train(")  # the steps' one-line summaries and the progress bars
        driver.save_screenshot(str(ARTIFACTS / shot.name.replace(".png", "-steps.png")))
        scroll_to(driver, "steps.summary(record)")
        assert "finished" in summary, f"no finished summary after Run All; outputs: {outputs[-3000:]}"
        return summary, outputs
    finally:
        driver.save_screenshot(str(shot))
        print(f"screenshots: {shot} (summary), {shot.name.replace('.png', '-steps.png')} (steps)")


def type_at_end_of_cell(driver, source: str, text: str) -> None:
    """Click into the code cell whose input contains `source`, type `text` on a new last line, leave it."""
    from selenium.webdriver.common.keys import Keys

    for cell in driver.find_elements("css selector", ".jp-NotebookPanel .jp-CodeCell"):
        if source in " ".join(page_text(cell, ".jp-InputArea .cm-content")):
            editor = cell.find_element("css selector", ".cm-content")
            editor.click()
            editor.send_keys(Keys.CONTROL, Keys.END)
            editor.send_keys(Keys.ENTER, text, Keys.ESCAPE)
            assert text in " ".join(page_text(cell, ".jp-InputArea .cm-content"))
            return
    raise AssertionError(f"no code cell contains {source!r}")


def scroll_to(driver, source: str) -> None:
    """Scroll the first code cell whose input contains `source` into the middle of the window."""
    for cell in driver.find_elements("css selector", ".jp-NotebookPanel .jp-CodeCell"):
        if source in " ".join(page_text(cell, ".jp-InputArea .cm-content")):
            driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", cell)
            time.sleep(0.5)
            return


TINY = dict(batch=64, max_length=32, epochs=1, lr=5e-3, run_name="lab-test")


def test_nvidia_notebook_runs_all_cells_in_jupyterlab(lab, browser, tiny_model_dir, tiny_data_dir, tmp_path):
    reason = kernel_missing_reason("accelbench")
    if reason:
        pytest.skip(reason)
    results = tmp_path / "results"
    nb = prepare(
        "Nvidia/baseline.ipynb",
        lab.root,
        model_name=tiny_model_dir,
        data_dir=tiny_data_dir,
        results_path=results,
        **TINY,
    )
    # a user's edit in the browser: batch 64 (injected) becomes 32, so 256 rows take 8 steps, not 4
    summary, outputs = run_all_in_browser(
        browser, lab, nb, "accelbench (CPU / CUDA)", "lab-nvidia.png", typed_parameters="batch = 32"
    )
    assert "status" in summary and "test_accuracy" in summary
    assert "training: finished, 8 steps" in outputs  # each step's one-line summary, under its cell
    assert "Failed to load" not in outputs and "TqdmWarning" not in outputs  # no import noise
    (rec,), _ = records.read_records(results)
    assert rec["status"] == "finished" and rec["run_name"] == "lab-test" and rec["params"]["batch"] == 32
    assert rec["device"]["type"] == "cpu"


def test_trainium_notebook_runs_all_cells_on_the_xla_kernel(lab, browser, tiny_model_dir, tiny_data_dir, tmp_path):
    reason = kernel_missing_reason("accelbench-xla")
    if reason:
        pytest.skip(reason)
    results = tmp_path / "results"
    nb = prepare(
        "Trainium/baseline.ipynb",
        lab.root,
        model_name=tiny_model_dir,
        data_dir=tiny_data_dir,
        results_path=results,
        batch=16,
        max_length=32,
        train_subset=128,
        eval_subset=32,
        max_steps=4,
        precision="fp32",
        run_name="lab-test-xla",
    )
    summary, outputs = run_all_in_browser(browser, lab, nb, "accelbench-xla (torch-xla)", "lab-trainium.png")
    assert "status" in summary and "test_accuracy" in summary and "XLA CPU" in summary
    assert "TqdmWarning" not in outputs
    (rec,), _ = records.read_records(results)
    assert rec["status"] == "finished" and rec["device"]["type"] == "xla"
    assert rec["xla"]["env"]["PJRT_DEVICE"] == "CPU" and rec["xla"]["graph_compilations"] > 0
