"""The course's kernel provisioner: every Jupyter client in ``.venv`` starts the lessons'
kernels with CurveZMQ transport encryption.

JupyterLab and nbconvert take ``KernelManager.transport_encryption`` from
``jupyter_config/``; ``jupyter execute`` (nbclient's command) passes no settings to the
kernel manager it makes, so its kernels warned that they run "over TCP without encryption".
A kernel provisioner travels with the kernelspec instead: ``scripts/setup_env.py`` names this
one in ``.venv``'s ``python3`` kernelspec, and it asks for encryption ("auto": used when
libzmq has CURVE and the kernelspec declares ``supported_encryption: ["curve"]``, as
ipykernel's does) unless the caller chose a policy.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from jupyter_client.provisioning import LocalProvisioner

#: The name ``jupyter_client`` knows this provisioner by (pyproject.toml's entry point).
PROVISIONER_NAME = "primer-encrypted-local"


class EncryptedLocalProvisioner(LocalProvisioner):
    """``LocalProvisioner`` whose default transport-encryption policy is ``"auto"``."""

    async def pre_launch(self, **kwargs: Any) -> dict[str, Any]:
        """Launch as ``LocalProvisioner`` does, with ``transport_encryption="auto"`` unless
        ``kwargs`` name a policy or the kernel manager's own is "auto" or "required"."""
        chosen = getattr(self.parent, "transport_encryption", "disabled")
        kwargs.setdefault("transport_encryption", "auto" if chosen == "disabled" else chosen)
        launch: dict[str, Any] = await super().pre_launch(**kwargs)
        return launch


def use_in_kernelspec(prefix: str | Path = sys.prefix, name: str = "python3") -> Path:
    """Name this provisioner in the kernelspec ``name`` under ``prefix`` (an environment's
    root, default this interpreter's); returns the kernel.json path. ``FileNotFoundError``
    when the environment has no such kernelspec (ipykernel not installed there)."""
    path = Path(prefix) / "share" / "jupyter" / "kernels" / name / "kernel.json"
    spec = json.loads(path.read_text(encoding="utf-8"))
    spec.setdefault("metadata", {})["kernel_provisioner"] = {
        "provisioner_name": PROVISIONER_NAME, "config": {}}
    path.write_text(json.dumps(spec, indent=1) + "\n", encoding="utf-8")
    return path
