"""What a script says: ScriptFacts extracted in one LibCST pass (collector.py walks, extract.py assembles).

`extract_facts` is imported on first use: LibCST costs ~0.15 s to import, which a run that finds nothing
to parse (or reads everything from the cache) should not pay.
"""

from trainlint.facts.model import ArgsObject, Call, Evidence, ModelLoad, ScriptFacts, TrainerCall
from trainlint.facts.values import UNKNOWN, UNSET, Value, known


def extract_facts(module, path: str, text: str, starts=True, parse_helpers=frozenset(), tree=None) -> ScriptFacts:
    from trainlint.facts.extract import extract_facts as _extract

    return _extract(module, path, text, starts, parse_helpers, tree)


__all__ = ["extract_facts", "ArgsObject", "Call", "Evidence", "ModelLoad", "ScriptFacts", "TrainerCall", "UNKNOWN",
           "UNSET", "Value", "known"]
