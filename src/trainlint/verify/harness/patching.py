"""How the harness patches libraries: lazily, right after a module is imported (a post-import hook on
``sys.meta_path``, so a script that never imports transformers never pays for importing it), and at most once
per function (a wrapper is marked, so a second install or a subclass never wraps twice)."""

from __future__ import annotations

import functools
import importlib.abc
import sys


class PostImportHooks(importlib.abc.MetaPathFinder):
    """Runs hooks[name](module) right after module `name` has executed (or at once if already imported)."""

    def __init__(self, hooks: dict, on_error):
        self.hooks = hooks
        self.on_error = on_error
        self._busy: set[str] = set()

    def install(self) -> None:
        sys.meta_path.insert(0, self)
        for name in list(self.hooks):
            mod = sys.modules.get(name)
            if mod is not None:
                self._run(name, mod)

    def _run(self, name, module) -> None:
        for hook in self.hooks.pop(name, ()):
            try:
                hook(module)
            except Exception as exc:  # a patch that fails must never break the import
                self.on_error(f"patching {name} failed: {type(exc).__name__}: {exc}")

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in self.hooks or fullname in self._busy:
            return None
        self._busy.add(fullname)
        try:
            spec = None
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
        finally:
            self._busy.discard(fullname)
        loader = getattr(spec, "loader", None)
        if spec is None or loader is None or not hasattr(loader, "exec_module"):
            return None
        original = loader.exec_module
        hooks = self

        def exec_module(module):
            original(module)
            hooks._run(fullname, module)

        try:
            loader.exec_module = exec_module  # one loader instance per module: safe to shadow on the instance
        except Exception:
            return None
        return spec




def wraps_once(fn, wrapper):
    functools.update_wrapper(wrapper, fn)
    wrapper.__trainlint_wrapped__ = True
    return wrapper


def patch_method(cls, name: str, make) -> None:
    fn = cls.__dict__.get(name)
    if fn is None or getattr(fn, "__trainlint_wrapped__", False):
        return
    if isinstance(fn, (staticmethod, classmethod)):
        return
    setattr(cls, name, wraps_once(fn, make(fn)))


def patch_classmethod(cls, name: str, make) -> None:
    cm = cls.__dict__.get(name)
    if not isinstance(cm, classmethod) or getattr(cm.__func__, "__trainlint_wrapped__", False):
        return
    setattr(cls, name, classmethod(wraps_once(cm.__func__, make(cm.__func__))))
