"""The machine's owner comes first: the rules for when this machine works for the pool
(`rules`), what is observed for them (`idle`, `observe`), the one decision (`verdict`), the
owner's shares as reported to the hub (`caps`) and the files the owner's commands share with the
running agent (`state`)."""

from agent.owner.observe import Observer
from agent.owner.rules import OwnerRules
from agent.owner.state import OwnerStatus, StateDir
from agent.owner.verdict import KEEP, OWNER, THERMAL, Observation, Verdict, may_take_work

__all__ = [
    "KEEP",
    "OWNER",
    "THERMAL",
    "Observation",
    "Observer",
    "OwnerRules",
    "OwnerStatus",
    "StateDir",
    "Verdict",
    "may_take_work",
]
