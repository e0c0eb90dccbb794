"""Settings every Jupyter command reads (nbconvert, JupyterLab, the server, the console) when
this folder is on ``JUPYTER_CONFIG_PATH``: ``make`` exports it, or run one command with it,
e.g. ``JUPYTER_CONFIG_PATH=jupyter_config .venv/bin/jupyter nbconvert --execute ...``.

Kernels started this way get CurveZMQ keys, so ipykernel does not warn that it "is running
over TCP without encryption". ``jupyter execute`` (nbclient's command) passes no settings to
the kernels it starts; the kernel provisioner named in .venv's kernelspec
(primer/views/kernel.py) asks for the keys there.
"""

import zmq

c = get_config()  # noqa: F821 - provided by traitlets when it loads this file

if zmq.has("curve"):
    c.KernelManager.transport_encryption = "auto"
