"""numba's disk cache, made to notice a change in any module a kernel can inline.

numba keys a cached kernel on its own source file only (its mtime and size). Our
kernels inline helpers from other modules (the JSON scanners' byte and number readers,
the records text kernel's word and hash loops): after an upgrade that changed only a
helper, a kept ``__pycache__`` would run the old machine code. A cache locator goes in
front of numba's own for the modules of ``learners`` and ``service``
whose stamp also carries a digest of every such module the kernel's module reaches
through its globals (imported modules, functions and dispatchers, recursively): a
change to any of them makes the cached entry stale, and numba compiles afresh. numba
finds these locators by name (``NUMBA_CACHE_LOCATOR_CLASSES``, which ``learners``
sets when it is imported, before numba reads it: this module imports numba and is
loaded by numba itself when it first caches a kernel).

Only globals can be inlined or called by a numba kernel, so the walk finds everything
a kernel can compile in (and some modules it does not: an edit there costs a compile,
never a wrong answer).
"""

from __future__ import annotations

import hashlib
import sys
from types import ModuleType
from typing import Any

from numba.core import caching

_PACKAGES = ("learners", "service")
_files: dict[str, str] = {}  # path -> sha256 of its bytes, once per process
_closures: dict[str, dict[str, str]] = {}  # module name -> {module: file} it reaches


def _ours(name: object) -> bool:
    return isinstance(name, str) and name.split(".", 1)[0] in _PACKAGES


def _module_of(value: Any) -> str | None:
    if isinstance(value, ModuleType):
        return value.__name__
    py_func = getattr(value, "py_func", None)  # a numba dispatcher
    if py_func is not None:
        return getattr(py_func, "__module__", None)
    try:
        name = getattr(value, "__module__", None)
    except Exception:  # an object whose attribute access raises
        return None
    return name if isinstance(name, str) else None


def module_files(module_name: str) -> dict[str, str]:
    """The source files of ``module_name`` and of every module of ours it reaches
    through its globals, recursively, by module name (as they are now: the kernel's
    module may still be importing)."""
    seen: set[str] = set()
    files: dict[str, str] = {}
    todo = [module_name]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        module = sys.modules.get(name)
        path = getattr(module, "__file__", None)
        if module is None or not isinstance(path, str):
            continue
        files[name] = path
        for value in list(vars(module).values()):
            other = _module_of(value)
            if other is not None and other not in seen and _ours(other):
                todo.append(other)
    return files


def file_digest(path: str) -> str:
    digest = _files.get(path)
    if digest is None:
        with open(path, "rb") as f:
            digest = _files[path] = hashlib.sha256(f.read()).hexdigest()
    return digest


def dependency_stamp(module_name: str) -> str:
    """One digest of the sources ``module_name``'s kernels can compile in."""
    files = _closures.get(module_name)
    if files is None:
        files = _closures[module_name] = module_files(module_name)
    h = hashlib.sha256()
    for name in sorted(files):  # by name, not path: a checkout moved keeps its cache
        h.update(name.encode() + b"\0" + file_digest(files[name]).encode() + b"\n")
    return h.hexdigest()


class _Dependencies:
    """Mixin: for our modules only, the source stamp with the dependency digest."""

    @classmethod
    def from_function(cls, py_func: Any, py_file: str) -> Any:
        if not _ours(getattr(py_func, "__module__", None)):
            return None
        return super().from_function(py_func, py_file)  # type: ignore[misc]

    def __init__(self, py_func: Any, py_file: str) -> None:
        super().__init__(py_func, py_file)  # type: ignore[call-arg]
        self._module_name = py_func.__module__

    def get_source_stamp(self) -> Any:
        return (super().get_source_stamp(), dependency_stamp(self._module_name))  # type: ignore[misc]


class UserProvided(_Dependencies, caching.UserProvidedCacheLocator):
    pass


class InTree(_Dependencies, caching.InTreeCacheLocator):
    pass


class UserWide(_Dependencies, caching.UserWideCacheLocator):
    pass
