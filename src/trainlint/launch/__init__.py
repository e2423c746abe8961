"""How a script is run: launchers, README commands, notebook launch lines, recipes and configs, read into bindings
with spans (the launch front ends). A regular package (it was a namespace package), so that import-linter and grimp
see its modules: the layers in pyproject.toml hold it between the facts and the resolver."""
