"""Framework configs as a front end: an axolotl or LLaMA-Factory YAML is a launch of the framework's own trainer
run. axolotl.py / llamafactory.py map its keys to ScriptFacts (synth.py builds them), fixes.py speaks the config's
keys and edits the YAML; framework_lint.py runs every rule on the result. Which YAML is such a config is decided
below, in launch/framework_config.py (discovery of a script's launches needs it); what each release does is in
knowledge/frameworks.py."""
