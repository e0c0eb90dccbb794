"""AgentDojo's suites through primer's loop (the optional extra ``.[agentdojo]``).

AgentDojo (the ``agentdojo`` package; benchmark v1.2.2 by default) ships four suites
(workspace, travel, banking, slack) of user tasks over pure-Python tools and a pydantic
environment, each task with its ground-truth calls and a utility check, plus injection tasks
that plant an attacker's instruction in a tool result. The modules here:

* :mod:`.world` - a suite's tools as primer :class:`~primer.loop.tools.Tool`\\ s, run through
  AgentDojo's own runtime and formatted as it formats them; one environment per trial; the
  score AgentDojo gives (its trace-based utility first); the suite as eval tasks;
* :mod:`.replay` - the offline models: a task's ground truth replayed (one call a reply,
  parallel batches, or all in one reply), and an "attacked" model that also plays an
  injection task's calls once it reads the planted instruction;
* :mod:`.limits` - which tasks a config of your own would stop;
* :mod:`.injection` - prompt injection measured under each guard the course teaches;
* :mod:`.timing` - the harness's own time per model call beside AgentDojo's own tool loop.

Nothing here imports ``agentdojo`` until it is used; without it, each entry point raises
:class:`~.world.AgentDojoMissing` saying how to install it.
"""
