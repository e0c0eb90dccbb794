"""A long, static system prompt: the leave policy handbook an HR assistant is given.

Prompt caching pays only on a prefix the API will cache, which starts at a model's minimum
length (:data:`primer.providers.claude.MIN_CACHEABLE_TOKENS`, 2,048 tokens for the course's
default model). The PTO scenario's own system prompt is a few dozen tokens; lesson 13's
caching example puts this handbook in front of it so that the prefix is well above that.
"""

from __future__ import annotations

_TOPICS = ("annual leave", "sick leave", "parental leave", "public holidays", "carry-over",
           "unpaid leave", "leave requests", "leave balances", "part-time staff",
           "notice periods", "bereavement leave", "jury duty")

_CLAUSE = ("{n}. {topic}. Requests for {topic} are made in the HR system at least five working "
           "days ahead unless the case is urgent; a manager approves or declines within two "
           "working days and records the reason. Balances for {topic} are computed per "
           "calendar year from the employee's contract, pro rata for part-time contracts, and "
           "shown as of a given date. Questions the policy does not answer go to the HR team; "
           "never guess a balance or a rule, look it up with the tools.")

#: About 12,000 characters of policy (about 3,000 tokens by characters/4).
HANDBOOK = "Leave policy handbook (applies to every employee).\n" + "\n".join(
    _CLAUSE.format(n=n, topic=topic)
    for n, topic in enumerate((t for _ in range(2) for t in _TOPICS), start=1))


def system_with_handbook(system: str) -> str:
    """``system`` followed by the :data:`HANDBOOK`: a static prefix worth caching."""
    return f"{system}\n\n{HANDBOOK}"
