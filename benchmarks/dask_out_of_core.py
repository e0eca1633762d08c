"""A DaskVIBoostClassifier fit on a parquet dataset larger than the workers' total memory.

Run from the repository root::

    python benchmarks/dask_out_of_core.py                  # 6 GB of features, 2 x 1.5 GB workers
    python benchmarks/dask_out_of_core.py --gb 0.05 --rounds 5 --memory-limit 1GB   # quick check
    python benchmarks/dask_out_of_core.py --gb 12 --workers 4 --memory-limit 2GB

Options: ``--dir`` (where the dataset is written once and reused, and where the workers spill;
default ``/tmp/viboost-ooc``), ``--gb`` (size of the float64 features in memory, 10^9 bytes,
default 6), ``--features D`` (default 20), ``--partition-mb`` (in-memory size of one partition,
default 100), ``--flip-rate`` (default 0.1), ``--workers`` (default 2), ``--memory-limit`` (per
worker, default 1.5GB), ``--rounds T`` (default 20), ``--poll`` (seconds between memory samples,
default 0.5) and ``--out PATH`` (default ``benchmarks/dask_out_of_core.md``). The report is
printed on stdout and written atomically to ``--out``; progress goes to stderr. Exit status 1
when ``viboost.dask`` cannot be imported, when the disk is too full, or when the fit fails (the
report is still written then, with the error).

What it shows: ``DaskVIBoostClassifier(n_estimators=T, preset="paper", random_state=0)`` fits
on a ``distributed.LocalCluster`` of W worker processes with one thread each and
``memory_limit`` each, whose total memory (W x limit: 3 GB by default) is smaller than the data
(6 GB by default). The data come from ``dask.dataframe.read_parquet``: ``X = df[["f0", ...]]``,
``y = df["y"]``; no process ever holds all of them.

The dataset (written once per set of sizes and seed, in a directory under ``--dir`` named after
them, and reused by later runs): N = gb x 10^9 / (8 D) rows of D float64 columns ``f0..``, i.i.d.
standard normal from ``dask.array.random.default_rng`` with a fixed seed, and an int8 label
``y = 1[X[:, :5] @ (1, -1, 0.5, 0.5, -0.5) + 0.5 e > 0]`` (e ~ N(0, 1) per row), flipped with
probability ``--flip-rate``. The array is cut into partitions of ``--partition-mb`` MB of
features, turned into a dataframe with ``dask.dataframe.from_dask_array`` and written with
``to_parquet`` by the cluster's workers, a partition at a time each, under their memory limits,
into a temporary directory that is renamed when complete (so an interrupted write is never
reused). The workers are then restarted so that the fit starts from fresh processes. Before
anything is written, the free disk space under ``--dir`` must be at least twice the data size
(the parquet files and room for the workers to spill); when the dataset is reused, once the
data size (spill room).

Measured:

- fit time: wall clock of ``fit`` (``time.perf_counter``), which includes reading the parquet
  files; one fit, no warm-up (it includes the workers' numba compilation or cache loading);
- peak RSS of each worker process: a background thread calls
  ``client.run(psutil.Process().memory_info().rss)`` every ``--poll`` seconds during the fit
  (and once after it) and keeps the largest value per worker; the same call reads the kernel's
  high-water mark VmHWM (reset just before the fit through /proc/self/clear_refs, Linux), which
  catches a peak between two samples, and the bytes the worker has spilled to disk;
- the client's peak RSS over the whole run (``resource.getrusage(RUSAGE_SELF).ru_maxrss``);
- the dataset: rows, features, partitions, in-memory float64 size, on-disk parquet size;
- training accuracy of ``predict`` on the first partition (computed on the cluster).

A worker that exceeds its memory limit is killed and restarted by its nanny (new address): the
report lists every worker address it saw, so a restart shows as an extra row.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import math
import os
import resource
import shlex
import shutil
import sys
import threading
import time
import traceback
import warnings
from pathlib import Path
from typing import Any

# Run as a script, this directory is sys.path[0], and benchmarks/dask.py would then shadow the
# dask package for ``import dask`` (here and inside distributed, lightgbm, xgboost). Move the
# directory to the end of sys.path: the package wins, and dask_report (beside this file) is
# still found. Worker processes start with this sys.path too (multiprocessing's spawn copies it).
_HERE = Path(__file__).resolve().parent
sys.path = [p for p in sys.path if Path(p or ".").resolve() != _HERE] + [str(_HERE)]

import dask  # noqa: E402
import dask.array as da  # noqa: E402
import dask.dataframe as dd  # noqa: E402
import numpy as np  # noqa: E402
from dask.utils import parse_bytes  # noqa: E402
from dask_report import close_quietly, machine_lines, progress, versions_line  # noqa: E402
from distributed import Client, LocalCluster  # noqa: E402

from viboost._utils.io import atomic_write_text  # noqa: E402

WEIGHTS = (1.0, -1.0, 0.5, 0.5, -0.5)
NOISE_SCALE = 0.5
SEED = 20_260_810
META_NAME = "_viboost_ooc.json"  # parquet readers skip names that start with "_"
CLOSE_TIMEOUT_S = 60.0
CONNECT_TIMEOUT_S = 120.0
RESTART_TIMEOUT_S = 120.0
POLLER_JOIN_S = 30.0
GB = 1e9
VERSIONED = ("viboost", "dask", "distributed", "numpy", "pandas", "pyarrow", "psutil")


# ---------------------------------------------------------------------------------- dataset
def dataset_shape(gb: float, features: int, partition_mb: float) -> tuple[int, int, int]:
    """Rows, rows per partition and number of partitions for ``gb`` of float64 features."""
    rows = max(1, int(gb * GB / (8 * features)))
    per_part = max(1, min(rows, int(partition_mb * 1e6 / (8 * features))))
    return rows, per_part, math.ceil(rows / per_part)


def dataset_dir(args: argparse.Namespace, rows: int, per_part: int) -> Path:
    """Directory of the dataset for these sizes, flip rate and seed (under ``--dir``)."""
    flip = f"{args.flip_rate:g}".replace(".", "p")
    return args.dir / f"data-{rows}x{args.features}-part{per_part}-flip{flip}-seed{SEED}"


def free_bytes(path: Path) -> int:
    """Free bytes on the file system that holds ``path`` (or its nearest existing parent)."""
    path = path.resolve()
    while not path.exists():
        path = path.parent
    return shutil.disk_usage(path).free


def write_dataset(path: Path, rows: int, features: int, per_part: int, flip_rate: float) -> None:
    """Generate the dataset on the cluster (current client) and write it as parquet to ``path``.

    Every partition is generated and written by one task, so memory holds a few partitions at a
    time. The files go to a temporary sibling directory, renamed to ``path`` when complete.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    for stale in path.parent.glob(f".partial-{path.name}-*"):  # left by an interrupted write
        shutil.rmtree(stale, ignore_errors=True)
    tmp = path.parent / f".partial-{path.name}-{os.getpid()}"
    rng = da.random.default_rng(SEED)
    X = rng.standard_normal((rows, features), chunks=(per_part, features))
    noise = rng.standard_normal(rows, chunks=per_part)
    k = min(features, len(WEIGHTS))
    y = (X[:, :k] @ np.asarray(WEIGHTS[:k]) + NOISE_SCALE * noise > 0).astype(np.int8)
    if flip_rate > 0:
        flip = rng.random(rows, chunks=per_part) < flip_rate
        y = da.where(flip, 1 - y, y).astype(np.int8)
    columns = [f"f{j}" for j in range(features)]
    table = da.concatenate([X, y[:, None].astype(np.float64)], axis=1)
    df = dd.from_dask_array(table, columns=[*columns, "y"]).astype({"y": "int8"})
    try:
        df.to_parquet(str(tmp), write_index=False)
        meta = {
            "rows": rows,
            "features": features,
            "rows_per_partition": per_part,
            "flip_rate": flip_rate,
            "seed": SEED,
            "weights": WEIGHTS,
            "noise_scale": NOISE_SCALE,
        }
        (tmp / META_NAME).write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
        os.rename(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def parquet_bytes(path: Path) -> tuple[int, int]:
    """Total size and number of the parquet files under ``path``."""
    files = [f for f in path.rglob("*.parquet") if f.is_file()]
    return sum(f.stat().st_size for f in files), len(files)


# ---------------------------------------------------------------------------------- memory
def worker_memory(dask_worker: Any = None) -> dict[str, int]:
    """Run on a worker (``client.run``): its RSS, VmHWM and bytes spilled to disk, where known."""
    import psutil

    out = {"rss": int(psutil.Process().memory_info().rss)}
    with contextlib.suppress(OSError, ValueError, IndexError):
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    out["hwm"] = int(line.split()[1]) * 1024
    with contextlib.suppress(AttributeError, TypeError):
        out["spilled"] = int(dask_worker.data.spilled_total.disk)
    return out


def reset_hwm() -> bool:
    """Run on a worker: reset its RSS high-water mark (Linux >= 4.0); False if not possible."""
    try:
        with open("/proc/self/clear_refs", "w") as clear_refs:
            clear_refs.write("5")
    except OSError:
        return False
    return True


class MemoryPoller:
    """Samples every worker's memory every ``interval`` seconds in a background thread.

    Used as a context manager around the fit: the thread starts on entry and is stopped (and
    joined, within ``POLLER_JOIN_S``) on exit, after which one last sample is taken.
    """

    def __init__(self, client: Client, interval: float) -> None:
        self.client = client
        self.interval = interval
        self.peak_rss: dict[str, int] = {}
        self.hwm: dict[str, int] = {}
        self.peak_spilled: dict[str, int] = {}
        self.samples = 0
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="memory-poller", daemon=True)

    def sample(self) -> None:
        """One ``client.run`` over all workers; keeps the maxima."""
        try:
            results = self.client.run(worker_memory, on_error="return")
        except Exception:  # a worker restarting, the cluster closing: count it and go on
            self.failures += 1
            return
        self.samples += 1
        for address, value in results.items():
            if not isinstance(value, dict):
                self.failures += 1
                continue
            self.peak_rss[address] = max(self.peak_rss.get(address, 0), value["rss"])
            if "hwm" in value:
                self.hwm[address] = max(self.hwm.get(address, 0), value["hwm"])
            if "spilled" in value:
                spilled = max(self.peak_spilled.get(address, 0), value["spilled"])
                self.peak_spilled[address] = spilled

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval)

    def __enter__(self) -> MemoryPoller:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(timeout=POLLER_JOIN_S)
        if self._thread.is_alive():
            print("warning: the memory poller did not stop in time", file=sys.stderr)
        else:
            self.sample()


def client_peak_rss() -> int:
    """Peak RSS of this (the client) process in bytes (``ru_maxrss`` is in KiB on Linux)."""
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(maxrss if sys.platform == "darwin" else maxrss * 1024)


# ---------------------------------------------------------------------------------- report


def gb(n: float | None) -> str:
    """Bytes as GB (10^9), or a dash."""
    return "-" if n is None else f"{n / GB:.3g} GB"


def build_report(r: dict[str, Any], args: argparse.Namespace) -> str:
    """The markdown report."""
    limit = parse_bytes(args.memory_limit)
    thresholds = ", ".join(
        f"{name} {dask.config.get(f'distributed.worker.memory.{name}')}"
        for name in ("target", "spill", "pause", "terminate")
    )
    rows = [
        ("status", r["status"]),
        (
            "data in memory (float64 features)",
            f"{gb(r['data_bytes'])} ({r['rows']:,} rows x {args.features} features; "
            f"labels int8: {gb(r['rows'])} more)",
        ),
        (
            "parquet on disk",
            f"{gb(r['parquet_bytes'])} in {r['parquet_files']} files, read as "
            f"{r.get('npartitions', '-')} partitions ({args.partition_mb:g} MB of features each)"
            f"; {'reused' if r['reused'] else 'written by this run'}",
        ),
        (
            "workers",
            f"{args.workers} processes x 1 thread, memory_limit {args.memory_limit} "
            f"({gb(limit)}) each "
            f"({gb(limit * args.workers)} in all = {limit * args.workers / r['data_bytes']:.2f} "
            f"x the data); memory fractions {thresholds}",
        ),
        ("rounds", f"{args.rounds} (preset='paper')"),
        ("fit time", f"{r['fit_s']:.1f} s" if "fit_s" in r else "-"),
    ]
    for i, address in enumerate(sorted(r.get("peak_rss", {}))):
        hwm = r.get("hwm", {}).get(address)
        spilled = r.get("peak_spilled", {}).get(address)
        rows.append(
            (
                f"worker {i} ({address})",
                f"peak RSS {gb(r['peak_rss'][address])} (polled); VmHWM {gb(hwm)}; "
                f"RSS before the fit {gb(r.get('rss_before', {}).get(address))}; "
                f"most spilled to disk {gb(spilled)}",
            )
        )
    rows += [
        (
            "memory samples",
            f"{r.get('samples', 0)} (every {args.poll:g} s), {r.get('failures', 0)} failed",
        ),
        ("client peak RSS (ru_maxrss, whole run)", gb(r["client_peak"])),
        (
            "training accuracy",
            f"{r['accuracy']:.4f} on the first partition ({r['accuracy_rows']:,} rows)"
            if "accuracy" in r
            else "-",
        ),
    ]
    lines = [
        "# Out-of-core Dask fit: DaskVIBoostClassifier on data larger than the workers' memory",
        "",
        f"- Date: {datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')}",
        *machine_lines(),
        versions_line(VERSIONED),
        f"- Command: `python {shlex.join(sys.argv)}`",
        f"- Dataset: `{r['path']}`",
        "",
        "| quantity | value |",
        "|:---|:---|",
        *(f"| {name} | {str(value).replace('|', '/')} |" for name, value in rows),
        "",
        "Peak RSS (polled) is the largest of the RSS samples taken during the fit; VmHWM is the "
        "kernel's high-water mark of the worker process since just before the fit, which also "
        "catches a peak between samples. GB = 10^9 bytes.",
        "",
    ]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------- main
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--dir", type=Path, default=Path("/tmp/viboost-ooc"))
    parser.add_argument("--gb", type=float, default=6.0, help="float64 features, 10^9 bytes")
    parser.add_argument("--features", type=int, default=20)
    parser.add_argument("--partition-mb", type=float, default=100.0)
    parser.add_argument("--flip-rate", type=float, default=0.1, help="0 for clean labels")
    parser.add_argument("--workers", type=int, default=2, help="worker processes (1 thread)")
    parser.add_argument("--memory-limit", default="1.5GB", help="per worker (dask syntax)")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--poll", type=float, default=0.5, help="seconds between samples")
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("dask_out_of_core.md"))
    args = parser.parse_args(argv)
    if args.gb <= 0 or args.partition_mb <= 0 or args.poll <= 0:
        parser.error("--gb, --partition-mb and --poll must be positive")
    if min(args.features, args.workers, args.rounds) < 1:
        parser.error("--features, --workers and --rounds must be positive")
    if not 0.0 <= args.flip_rate < 0.5:
        parser.error("--flip-rate must be in [0, 0.5)")
    try:
        parse_bytes(args.memory_limit)
    except ValueError as exc:
        parser.error(f"--memory-limit: {exc}")
    return args


def main(argv: list[str] | None = None) -> int:
    """Write (or reuse) the dataset, fit on the cluster while sampling memory, and report."""
    args = parse_args(argv)
    try:
        from viboost.dask import DaskVIBoostClassifier
    except ImportError as exc:
        print(
            "error: viboost.dask.DaskVIBoostClassifier cannot be imported "
            f"({type(exc).__name__}: {exc}). Install viboost with its Dask support.",
            file=sys.stderr,
        )
        return 1

    rows, per_part, n_parts = dataset_shape(args.gb, args.features, args.partition_mb)
    path = dataset_dir(args, rows, per_part)
    data_bytes = rows * args.features * 8
    reused = path.is_dir()
    needed = (1 if reused else 2) * (data_bytes + rows)
    free = free_bytes(args.dir)
    if free < needed:
        print(
            f"error: {gb(free)} free under {args.dir}, but this run needs {gb(needed)}: "
            + ("room for the workers to spill" if reused else "the parquet files and spill room")
            + f" for {gb(data_bytes + rows)} of data. Free some space, use --dir elsewhere or "
            "lower --gb.",
            file=sys.stderr,
        )
        return 1
    limit = parse_bytes(args.memory_limit)
    if limit * args.workers >= data_bytes:
        progress(
            f"warning: the workers' total memory ({gb(limit * args.workers)}) is not smaller "
            f"than the data ({gb(data_bytes)}): this run is not out of core"
        )

    r: dict[str, Any] = {
        "status": "not run",
        "path": path,
        "rows": rows,
        "data_bytes": data_bytes,
        "reused": reused,
    }
    # With dashboard_address=None the scheduler still serves HTTP (metrics) on the default port
    # and warns when another cluster has it; it then picks a free port, which is fine.
    warnings.filterwarnings("ignore", message="Port [0-9]+ is already in use", category=UserWarning)
    with contextlib.ExitStack() as stack:
        progress(f"starting a LocalCluster of {args.workers} workers, {args.memory_limit} each ...")
        cluster = LocalCluster(
            n_workers=args.workers,
            threads_per_worker=1,
            processes=True,
            memory_limit=args.memory_limit,
            local_directory=str(args.dir / "dask-worker-space"),
            dashboard_address=None,
        )
        stack.callback(close_quietly, "cluster", cluster.close, CLOSE_TIMEOUT_S)
        client = Client(cluster, timeout=CONNECT_TIMEOUT_S)
        stack.callback(close_quietly, "client", client.close, CLOSE_TIMEOUT_S)

        if reused:
            progress(f"reusing {path}")
        else:
            progress(
                f"writing {gb(data_bytes)} ({rows:,} rows x {args.features} features, "
                f"{n_parts} partitions) to {path} ..."
            )
            start = time.perf_counter()
            write_dataset(path, rows, args.features, per_part, args.flip_rate)
            progress(f"written in {time.perf_counter() - start:.1f} s; restarting the workers")
            client.restart(timeout=RESTART_TIMEOUT_S, wait_for_workers=True)
        r["parquet_bytes"], r["parquet_files"] = parquet_bytes(path)

        df = dd.read_parquet(str(path))
        feature_cols = [f"f{j}" for j in range(args.features)]
        X, y = df[feature_cols], df["y"]
        r["npartitions"] = df.npartitions

        clf = DaskVIBoostClassifier(
            n_estimators=args.rounds, preset="paper", random_state=0, client=client
        )
        before = client.run(worker_memory)
        r["rss_before"] = {address: value["rss"] for address, value in before.items()}
        client.run(reset_hwm)
        progress(f"fitting {args.rounds} rounds on {df.npartitions} partitions ...")
        poller = MemoryPoller(client, args.poll)
        try:
            with poller:
                start = time.perf_counter()
                clf.fit(X, y)
                r["fit_s"] = time.perf_counter() - start
            r["status"] = "fit completed"
        except Exception as exc:  # report the failure (a worker killed for memory, ...)
            traceback.print_exc()
            r["status"] = f"fit FAILED: {type(exc).__name__}: {exc}"[:300]
        r["peak_rss"], r["hwm"] = poller.peak_rss, poller.hwm
        r["peak_spilled"] = poller.peak_spilled
        r["samples"], r["failures"] = poller.samples, poller.failures

        if "fit_s" in r:
            progress(f"fit in {r['fit_s']:.1f} s; scoring the first partition ...")
            try:
                pred = np.asarray(clf.predict(X.partitions[0]).compute())
                truth = np.asarray(y.partitions[0].compute())
                r["accuracy"] = float(np.mean(pred == truth))
                r["accuracy_rows"] = int(truth.size)
            except Exception:  # the report is still worth writing
                traceback.print_exc()
        r["client_peak"] = client_peak_rss()

        report = build_report(r, args)
        print(report)
        atomic_write_text(args.out, report)
        progress(f"wrote {args.out}; shutting the cluster down ...")
    return 0 if "fit_s" in r else 1


if __name__ == "__main__":
    sys.exit(main())
