"""What a script says: ScriptFacts extracted in one LibCST pass (see extract.py)."""

from trainlint.facts.extract import extract_facts
from trainlint.facts.model import ArgsObject, Call, Evidence, ModelLoad, ScriptFacts, TrainerCall
from trainlint.facts.values import UNKNOWN, UNSET, Value, known

__all__ = ["extract_facts", "ArgsObject", "Call", "Evidence", "ModelLoad", "ScriptFacts", "TrainerCall", "UNKNOWN",
           "UNSET", "Value", "known"]
