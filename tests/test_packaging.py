"""The pip route (pyproject.toml) and the conda route (environment.yml) stay in step, and the
core library stays light enough to import without the notebook stack."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import yaml

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent

# conda-forge names that differ from the PyPI name of the same distribution.
CONDA_TO_PYPI = {
    "matplotlib-base": "matplotlib",
    "python-fastjsonschema": "fastjsonschema",
    "nbconvert-core": "nbconvert",  # without the pandoc and LaTeX extras
}
# Entries of environment.yml that are the toolchain, not dependencies of the project.
CONDA_TOOLCHAIN = {"python", "pip"}


def normalise(requirement: str) -> str:
    """'Foo_Bar[extra] >=1.2; python_version<"3.12"' -> 'foo-bar'."""
    name = re.split(r"[\s\[<>=!~;@]", requirement.strip(), maxsplit=1)[0]
    return name.lower().replace("_", "-").replace(".", "-")


def pyproject_dependency_names() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    requirements = project["dependencies"] + extras["dev"] + extras["frameworks"]
    return {normalise(r) for r in requirements}


def conda_dependency_names() -> set[str]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    names = set()
    for entry in env["dependencies"]:
        if isinstance(entry, dict):  # the `pip:` sub-list installs the project itself
            continue
        name = normalise(entry.split("::")[-1])
        if name not in CONDA_TOOLCHAIN:
            names.add(CONDA_TO_PYPI.get(name, name))
    return names


def test_normalise_strips_versions_extras_markers_and_case():
    assert normalise("Foo_Bar[extra] >=1.2; python_version<'3.12'") == "foo-bar"
    assert normalise("pydantic>=2") == "pydantic"
    assert normalise("ruamel.yaml") == "ruamel-yaml"


def test_environment_yml_lists_the_same_dependencies_as_pyproject():
    pip_names = pyproject_dependency_names()
    conda_names = conda_dependency_names()
    assert pip_names == conda_names, (
        f"only in pyproject.toml: {sorted(pip_names - conda_names)}; "
        f"only in environment.yml: {sorted(conda_names - pip_names)}"
    )


def test_environment_yml_installs_the_project_itself_with_its_dev_frameworks_and_agentdojo_extras():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert env["name"] == "agent-loop-primer"
    assert env["channels"] == ["conda-forge"]
    pip_lists = [e["pip"] for e in env["dependencies"] if isinstance(e, dict)]
    assert pip_lists == [["-e .[dev,frameworks,agentdojo]"]]


def test_ci_entry_point_is_an_executable_bash_script():
    run = ROOT / ".ci" / "run"
    assert run.read_text().startswith("#!/usr/bin/env bash")
    assert os.access(run, os.X_OK)


def test_importing_the_core_does_not_import_matplotlib_ipywidgets_or_anthropic():
    heavy = ("matplotlib", "ipywidgets", "anthropic")
    code = (f"import primer, primer.loop.loop, sys; "
            f"print(' '.join(m for m in {heavy!r} if m in sys.modules))")
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "", f"import primer.loop.loop pulled in: {done.stdout.strip()}"


def test_importing_the_core_loads_neither_jsonschema_nor_pydantic():
    heavy = ("jsonschema", "pydantic", "fastjsonschema")
    code = (f"import primer.loop.loop, primer.loop.mini, sys; "
            f"print(' '.join(m for m in {heavy!r} if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, check=True)
    assert "jsonschema" not in done.stdout.split() and "pydantic" not in done.stdout.split()


def test_a_tool_checks_its_input_without_loading_jsonschemas_format_checkers():
    formats = ("rfc3987_syntax", "rfc3339_validator", "isoduration", "arrow", "webcolors",
               "fqdn", "uri_template", "jsonpointer")
    code = textwrap.dedent(f"""
        import sys
        from primer.loop.tools import tool

        @tool
        def f(x: int) -> str:
            \"\"\"F.\"\"\"
            return str(x)

        assert f.input_errors({{"x": "1"}}) and f.input_errors({{"x": 1}}) is None
        print("jsonschema" in sys.modules, [m for m in {formats!r} if sys.modules.get(m)])
    """)
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, check=True)
    assert done.stdout.strip() == "True []"
