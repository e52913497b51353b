"""zeus's GPUs faked for the energy tests: energy counters that integrate the power a test sets, on a clock
the test advances (helpers/measure/energy_readers.py reads them through zeus's ZeusMonitor). A test module
takes the fixture by importing it: `from zeus_fakes import zeus_gpus`."""

from __future__ import annotations

import pytest


class Clock:
    """A clock the test sets (`t`) or advances; the timer, the meter and zeus's windows share it."""

    def __init__(self, t: float = 0.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


class FakeGpus:
    """zeus's GPUs (the calls ZeusMonitor and the reader make) of `n` GPUs: each energy counter (mJ)
    integrates the power the test sets as the clock advances; `counter=False` is a GPU before Volta."""

    def __init__(self, clock: Clock, n: int = 1, counter: bool = True) -> None:
        self.clock, self.counter = clock, counter
        self.watts, self.mj = [0.0] * n, [1_000_000.0] * n
        self.history = [(clock.t, list(self.mj))]

    def run(self, seconds: float, *watts: float) -> None:
        """Hold each GPU at `watts` (one figure: all of them) for `seconds`."""
        self.watts = list(watts * len(self.watts) if len(watts) == 1 else watts)
        self.mj = [mj + w * seconds * 1000 for mj, w in zip(self.mj, self.watts)]
        self.clock.t += seconds
        self.history.append((self.clock.t, list(self.mj)))

    def mj_at(self, t: float) -> list[float]:
        """Return the counters (mJ) as they stood at clock time `t`."""
        return [mj for when, mj in self.history if when <= t][-1]

    def __len__(self) -> int:
        return len(self.watts)

    def get_name(self, index: int) -> str:
        return f"Fake GPU {index}"

    def supports_get_total_energy_consumption(self, index: int) -> bool:
        return self.counter

    def get_total_energy_consumption(self, index: int) -> int:
        return int(self.mj[index])

    def get_average_power_usage(self, index: int) -> int:
        return int(self.watts[index] * 1000)


class FakePowerMonitor:
    """zeus's PowerMonitor (what ZeusMonitor integrates for GPUs without the counter): the energy each GPU
    drew between two instants of the test's clock."""

    def __init__(self, gpus: FakeGpus, gpu_indices: list[int]) -> None:
        self.gpus, self.gpu_indices = gpus, gpu_indices

    def get_energy(self, start: float, end: float) -> dict[int, float]:
        return {i: (self.gpus.mj_at(end)[i] - self.gpus.mj_at(start)[i]) / 1000 for i in self.gpu_indices}

    def stop(self) -> None:
        pass


@pytest.fixture
def zeus_gpus(monkeypatch):
    """Return a maker of FakeGpus that zeus's get_gpus() hands to ZeusMonitor and to the reader."""
    import zeus.device.gpu
    import zeus.monitor.energy

    def make(n: int = 1, counter: bool = True, clock: Clock | None = None) -> FakeGpus:
        gpus = FakeGpus(clock or Clock(), n, counter)
        monkeypatch.setattr(zeus.device.gpu, "_gpus", gpus)  # zeus's singleton: get_gpus() returns it
        monkeypatch.setattr(zeus.monitor.energy, "time", gpus.clock)  # zeus's window ends on the test's clock
        monkeypatch.setattr(
            zeus.monitor.energy, "PowerMonitor", lambda gpu_indices, update_period: FakePowerMonitor(gpus, gpu_indices)
        )
        return gpus

    return make
