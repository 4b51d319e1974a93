"""The type checker is part of the test command: the README states the command, ``.ci/run``
runs the same, and ``pyproject.toml`` names the rooms that mypy checks (the test command's
``python -m mypy`` is the check itself; these tests keep its wiring from drifting)."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _readme_test_command() -> str:
    text = (ROOT / "README.md").read_text()
    block = text.split("## Set-up: two commands", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    commands = [line for line in block.splitlines() if line.strip() and not line.startswith("#")]
    assert len(commands) == 2, commands
    return commands[1]


def test_ci_runs_the_readme_test_command_which_type_checks():
    command = _readme_test_command()
    ci = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line.startswith("python")]
    assert ci == [command]
    steps = [step.strip() for step in command.split("&&")]
    assert "python -m mypy" in steps
    assert steps.index("python -m mypy") < steps.index("python -m pytest")


def test_mypy_checks_the_runtime_and_the_backends():
    text = (ROOT / "pyproject.toml").read_text()
    section = text.split("[tool.mypy]", 1)[1].split("\n[", 1)[0]
    files = re.search(r"^files = \[(.*?)\]$", section, re.MULTILINE | re.DOTALL)
    assert files is not None, "[tool.mypy] names no files"
    checked = re.findall(r'"([^"]+)"', files.group(1))
    assert {"ember/runtime", "ember/backends"} <= set(checked)
    assert all((ROOT / path).exists() for path in checked)
    assert re.search(r'"mypy==[\d.]+"', text), "mypy is pinned in the test extra"
