"""Skills: saved instructions for one kind of task, loaded only when a task needs them.

A harness that handles many kinds of task could put every procedure in the system prompt,
but then every call re-sends all of them. A skill keeps only a one-line description in the
system prompt; the ``load_skill`` tool returns the full instructions when the model decides
a task needs them, and they enter the history once, for that run only.

:meth:`SkillBook.prompt_tokens` measures both layouts, so the saving is a number, not a claim:
per call, the index costs one line per skill instead of every skill's full text.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from primer.loop.model import estimate_tokens
from primer.loop.tools import Tool


@dataclass(frozen=True)
class Skill:
    """One saved procedure: ``name`` (what ``load_skill`` takes), a one-line
    ``description`` (what stays in the system prompt: say *when* to load it) and the full
    ``instructions`` text. ``ValueError`` for an empty name or a description with a newline.
    """

    name: str
    description: str
    instructions: str

    def __post_init__(self) -> None:
        if not self.name.strip():
            raise ValueError("a skill needs a name")
        if "\n" in self.description.strip():
            raise ValueError(f"skill {self.name!r}: the description must be one line; put the "
                             f"detail in its instructions")


class SkillBook:
    """A set of :class:`Skill` objects, and the two ways of giving them to a model.

    - :meth:`index_prompt`: the base system prompt plus one line per skill, with the
      :meth:`load_tool` that returns a skill's full text on request;
    - :meth:`full_prompt`: the base system prompt plus every skill's full text, no tool.

    ``ValueError`` when two skills share a name.
    """

    def __init__(self, skills: Iterable[Skill]) -> None:
        self.skills: dict[str, Skill] = {}
        for s in skills:
            if s.name in self.skills:
                raise ValueError(f"two skills are named {s.name!r}")
            self.skills[s.name] = s
        self.loaded: list[str] = []  #: names loaded through the tool, in order

    def index_prompt(self, base: str = "") -> str:
        """``base`` plus a list of skills, one line each, and when to call ``load_skill``."""
        lines = [f"- {s.name}: {s.description}" for s in self.skills.values()]
        return (f"{base}\n\nSkills: before a task of one of these kinds, call load_skill with "
                f"its name and follow the instructions it returns.\n" + "\n".join(lines)).strip()

    def full_prompt(self, base: str = "") -> str:
        """``base`` plus the full instructions of every skill (the layout skills replace)."""
        parts = [f"## {s.name}\n{s.instructions}" for s in self.skills.values()]
        return (f"{base}\n\n" + "\n\n".join(parts)).strip()

    def load(self, name: str) -> str:
        """The full instructions of skill ``name`` (records the load)."""
        self.loaded.append(name)
        return f"Skill {name}:\n{self.skills[name].instructions}"

    def load_tool(self) -> Tool:
        """The ``load_skill`` tool: ``{"name": <one of the skill names>}`` → instructions.

        The schema's ``enum`` lists the names, so a name that does not exist is refused by
        the schema check with the list of real names, before anything runs.
        """
        return Tool("load_skill",
                    "Load the full instructions of a skill listed in the system prompt. Call it "
                    "once, before starting a task of that kind.",
                    {"type": "object",
                     "properties": {"name": {"type": "string", "enum": list(self.skills),
                                             "description": "The skill's name."}},
                     "required": ["name"], "additionalProperties": False},
                    self.load)

    def prompt_tokens(self, base: str = "") -> dict[str, int]:
        """Estimated tokens (characters/4) of each layout, per model call.

        Returns ``{"full": ..., "index": ..., "load_skill_tool": ..., "per_skill_loaded":
        ...}``: the full prompt, the index prompt, the ``load_skill`` definition the index
        layout also sends, and the mean size of one loaded skill (which then stays in the
        history for the rest of that run).
        """
        sizes = [estimate_tokens(s.instructions) for s in self.skills.values()]
        return {"full": estimate_tokens(self.full_prompt(base)),
                "index": estimate_tokens(self.index_prompt(base)),
                "load_skill_tool": estimate_tokens(self.load_tool().definition()),
                "per_skill_loaded": round(sum(sizes) / len(sizes)) if sizes else 0}
