"""Per-step time of real JAX client programs under ember (``python -m ember.run``) and under JAX,
side by side: ``python -m benchmarks.ecosystem [program ...]`` (all of them by default). Each
program (``ecosystem_programs/``) runs in a process of its own under each and prints its losses
and its median step time once warm (``ecosystem_programs/_timing.py``);
``tests/test_ecosystem.py`` requires the losses to agree."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = Path(__file__).resolve().parent / "ecosystem_programs"


def run(program: Path, under_ember: bool) -> dict:
    args = ["-m", "ember.run", str(program)] if under_ember else [str(program)]
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def rows(result: dict, name: str) -> dict[str, dict]:
    return {name: result} if "losses" in result else {f"{name} {key}": value for key, value in result.items()}


def main() -> None:
    print("| program | ember per step | JAX per step | ember/JAX | final loss ember | final loss JAX |")
    print("|---|---|---|---|---|---|")
    wanted = set(sys.argv[1:])
    for program in sorted(p for p in PROGRAMS.glob("*.py") if not p.name.startswith("_")):
        if wanted and program.stem not in wanted:
            continue
        jax_rows, ember_rows = rows(run(program, False), program.stem), rows(run(program, True), program.stem)
        for name, want in jax_rows.items():
            got = ember_rows[name]
            print(f"| {name} | {got['step_seconds'] * 1e3:.3f} ms | {want['step_seconds'] * 1e3:.3f} ms | "
                  f"{got['step_seconds'] / want['step_seconds']:.2f} | {got['losses'][-1]:.6g} | "
                  f"{want['losses'][-1]:.6g} |")


if __name__ == "__main__":
    main()
