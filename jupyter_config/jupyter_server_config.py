"""Jupyter server and JupyterLab settings for this course.

`make lab`, `make lesson` and `make test-browser` add this folder to the config search path
(``JUPYTER_CONFIG_PATH``), so it applies on top of, never instead of, a user's own
``~/.jupyter`` settings. Without make: ``JUPYTER_CONFIG_PATH=jupyter_config jupyter lab``.
"""

from pathlib import Path

import zmq

c = get_config()  # noqa: F821 - provided by traitlets when it loads this file

# ipykernel warns "Kernel is running over TCP without encryption" at every start unless the
# kernel manager hands it CurveZMQ keys. "auto" provisions keys for kernelspecs that declare
# `"supported_encryption": ["curve"]` (ipykernel's own python3 kernel does) and leaves other
# kernels as they were. It needs a libzmq built with CurveZMQ (pyzmq's wheels are).
if zmq.has("curve"):
    c.KernelManager.transport_encryption = "auto"

# JupyterLab reads default settings from overrides.json in its app settings folder; the
# course's folder turns off the news prompt and update checks, whose notification would
# otherwise sit over the notebook on first start.
c.LabApp.app_settings_dir = str(Path(__file__).resolve().parent / "lab_settings")
