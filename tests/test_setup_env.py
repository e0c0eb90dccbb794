"""scripts/setup_env.py: the learner's environment holds what the lessons import, the
installer's progress is shown without its per-package lines, and the environment's kernels
start with transport encryption whatever Jupyter client starts them."""

from __future__ import annotations

import ast
import importlib.util
import json
import re
import sys
from importlib import metadata
from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("setup_env", ROOT / "scripts" / "setup_env.py")
assert spec is not None and spec.loader is not None
setup_env = importlib.util.module_from_spec(spec)
spec.loader.exec_module(setup_env)


def learner_extras() -> set[str]:
    """The extras `make lab` installs, read from the Makefile."""
    match = re.search(r"^LEARNER_EXTRAS := (.+)$", (ROOT / "Makefile").read_text(), re.M)
    assert match, "the Makefile no longer sets LEARNER_EXTRAS"
    return set(match[1].strip().split(","))


def installed_closure(extras: set[str]) -> set[str]:
    """Normalised names of every distribution agent-loop-primer[extras] pulls in."""
    def norm(name: str) -> str:
        return re.sub(r"[-_.]+", "-", name).lower()
    seen: set[str] = set()
    todo: list[tuple[str, set[str]]] = [("agent-loop-primer", extras)]
    while todo:
        name, wanted = todo.pop()
        if norm(name) in seen:
            continue
        seen.add(norm(name))
        for line in metadata.requires(name) or []:
            requirement = Requirement(line)
            marker = requirement.marker or Marker("python_version >= '0'")
            if any(marker.evaluate({"extra": extra}) for extra in wanted | {""}):
                try:
                    metadata.distribution(requirement.name)
                except metadata.PackageNotFoundError:
                    continue      # not on this platform or Python version
                todo.append((requirement.name, set(requirement.extras)))
    return seen


def notebook_imports() -> set[str]:
    """Top-level modules the lessons' code cells import."""
    modules: set[str] = set()
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] != "code":
                continue
            source = "".join(cell["source"])
            source = "\n".join(line for line in source.splitlines()
                               if not line.lstrip().startswith(("%", "!")))
            for node in ast.walk(ast.parse(source)):
                if isinstance(node, ast.Import):
                    modules.update(alias.name.split(".")[0] for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    modules.add(node.module.split(".")[0])
    return modules


def test_the_learner_environment_holds_every_module_the_lessons_import():
    closure = installed_closure(learner_extras())
    providers = metadata.packages_distributions()
    missing = {}
    for module in sorted(notebook_imports()):
        if module in sys.stdlib_module_names or module == "primer":
            continue
        dists = {re.sub(r"[-_.]+", "-", d).lower() for d in providers.get(module, [])}
        if not dists & closure:
            missing[module] = sorted(dists) or ["no installed distribution"]
    assert not missing, (f"lessons import modules `make lab` does not install: {missing}; "
                         "add their extra to LEARNER_EXTRAS in the Makefile")


def test_the_test_tools_are_not_in_the_learner_environment():
    closure = installed_closure(learner_extras())
    assert not {"pytest", "ruff", "mypy", "sphinx", "playwright", "nbval"} & closure


def test_progress_shows_the_installers_lines_and_counts_the_hidden_ones(capsys):
    command = [sys.executable, "-c",
               "print('Resolved 3 packages'); print(' + a==1'); print(' + b==2'); print('done')"]
    assert setup_env.run_streamed(command, hide_prefixes=("+ ",)) == 0
    out = capsys.readouterr().out
    assert "Resolved 3 packages" in out and "done" in out
    assert "a==1" not in out and "(2 package lines not shown)" in out


def test_a_failing_installer_returns_its_status(capsys):
    assert setup_env.run_streamed([sys.executable, "-c", "raise SystemExit(3)"]) == 3


def test_the_kernelspec_names_the_encrypting_provisioner(tmp_path):
    from primer.views.kernel import PROVISIONER_NAME, use_in_kernelspec
    folder = tmp_path / "share" / "jupyter" / "kernels" / "python3"
    folder.mkdir(parents=True)
    (folder / "kernel.json").write_text(json.dumps(
        {"argv": ["python"], "metadata": {"supported_encryption": ["curve"]}}))
    use_in_kernelspec(tmp_path)
    spec = json.loads((folder / "kernel.json").read_text())
    assert spec["metadata"]["kernel_provisioner"]["provisioner_name"] == PROVISIONER_NAME
    assert spec["metadata"]["supported_encryption"] == ["curve"]
    assert metadata.entry_points(group="jupyter_client.kernel_provisioners",
                                 name=PROVISIONER_NAME), "reinstall: pip install -e ."


def test_a_kernel_started_with_no_settings_gets_curve_keys():
    zmq = pytest.importorskip("zmq")
    if not zmq.has("curve"):
        pytest.skip("this libzmq has no CURVE")
    from jupyter_client.manager import start_new_kernel
    manager, client = start_new_kernel(kernel_name="python3", startup_timeout=60)
    try:
        assert manager.curve_publickey is not None
        assert client.execute_interactive("x = 1", timeout=30)["content"]["status"] == "ok"
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
