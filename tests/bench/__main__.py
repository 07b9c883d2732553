"""`python -m tests.bench [--only NAME] [--quick]`: run the benchmarks, write RESULTS.md/json."""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from types import FrameType

from tests.bench.cpu import CpuMeter, wait_machine_idle
from tests.bench.machine import describe_machine
from tests.bench.peer_gateways import install as install_peers
from tests.bench.peers import NAME as PEERS
from tests.bench.report import Report
from tests.bench.results import RunInfo, write_results
from tests.bench.runner import MEASUREMENTS, run_plan
from tests.bench.session import BenchSession
from tests.bench.settings import BenchSettings
from tests.bench.shapes import NAME as SHAPES
from tests.bench.targets import TargetResult, evaluate

_HERE = Path(__file__).resolve().parent
_REPO = _HERE.parents[1]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tests.bench", description=__doc__)
    parser.add_argument(
        "--only",
        action="append",
        choices=MEASUREMENTS,
        metavar="NAME",
        help=f"run only this measurement (repeatable): {', '.join(MEASUREMENTS)}",
    )
    parser.add_argument("--quick", action="store_true", help="small data set, short loads")
    parser.add_argument("--keys", type=int, default=1_000_000, help="data set size (1,000,000)")
    parser.add_argument("--out", type=Path, default=_HERE, help="where RESULTS.md/json go")
    parser.add_argument("--workdir", type=Path, help="state and logs (default: a temp dir)")
    parser.add_argument(
        "--wait-idle",
        type=float,
        default=30.0,
        metavar="S",
        help="first wait up to S s for other processes to leave the CPU (30)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument(
        "--py-spy", help="py-spy binary for profiles (default: next to python or on PATH)"
    )
    return parser


def _say(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _stop_on_sigterm() -> None:
    # the cluster's processes run in their own sessions: unwind so `finally` stops them
    def handler(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, handler)


def _print_targets(targets: list[TargetResult]) -> None:
    width = max(len(t.target) for t in targets)
    for t in targets:
        print(f"{t.status:<12} {t.target:<{width}}  {t.measured}")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="statefed-bench-"))
    settings = BenchSettings(workdir=workdir, keys=args.keys, py_spy=args.py_spy)
    settings = settings.quick() if args.quick else settings
    _stop_on_sigterm()
    if args.wait_idle > 0:
        idle = wait_machine_idle(args.wait_idle)
        _say(f"other processes use {idle.other_cores:.2f} cores; starting")
        # the wait counts against the budget: `make bench` stays under 10 minutes
        settings = replace(settings, budget_s=settings.budget_s - idle.seconds)
    if not args.only or PEERS in args.only or SHAPES in args.only:
        _say("peers: the pinned npm packages, installed the first time (not in the budget)")
        install_peers()
    machine = describe_machine(_REPO)
    report = Report()
    session = BenchSession(settings, _say)
    began, meter = time.monotonic(), CpuMeter()
    try:
        session.start()
        run_plan(session, report, args.only or ())
    finally:
        _say("stopping the cluster")
        session.close()
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    other_cores = meter.stop().other_cores
    targets = evaluate(report)
    command = "python -m tests.bench " + " ".join(argv if argv is not None else sys.argv[1:])
    info = RunInfo(
        machine,
        session.load.tool,
        time.monotonic() - began,
        _settings_json(settings),
        command.strip(),
        other_cores,
    )
    md, js = write_results(args.out, info, report, targets)
    _print_targets(targets)
    print(f"wrote {md} and {js} ({info.seconds:.0f} s)")
    return 0


def _settings_json(settings: BenchSettings) -> dict[str, object]:
    return {
        k: (str(v) if isinstance(v, Path) else v)
        for k, v in vars(settings).items()
        if k != "workdir"
    }


if __name__ == "__main__":
    sys.exit(main())
