"""Framework configs as first-class inputs: an axolotl or LLaMA-Factory YAML is read as the run it describes
(detect.py recognises it, axolotl.py / llamafactory.py map it to ScriptFacts, knowledge.py holds what each
release does, fixes.py speaks the config's keys and edits the YAML, check.py runs it through the rules)."""
