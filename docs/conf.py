"""Sphinx configuration of viboost's documentation (the API reference and the docs/*.md pages).

CI builds it with every cross-reference checked (issue 51)::

    python -m sphinx -n -W --keep-going -b html docs OUT

``-n`` (nitpicky) makes an unresolved reference a warning and ``-W`` makes a warning an error,
so a docstring's ``:class:`~viboost...``` that names nothing fails the build.  CI has no
network, so there is no intersphinx: references to other projects' objects (numpy, scipy,
scikit-learn, ..., the standard library) are ignored by the patterns of
``nitpick_ignore_regex`` below, which never match a ``viboost`` name.

The API pages are written by this file from the package itself (one page per module, by
autodoc), under ``docs/api/generated/`` (not kept in git): a new module is documented without
editing anything here, with its private members too, because the docstrings refer to them.
"""

from __future__ import annotations

import builtins
import importlib
import inspect
import os
import re
import shutil
import sys
import types

import viboost

project = "viboost"
author = "viboost developers"
copyright = "viboost developers"  # noqa: A001 - Sphinx's name
release = viboost.__version__
version = ".".join(release.split(".")[:2])

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.mathjax",
    "numpydoc",
    "myst_parser",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "**/.ipynb_checkpoints"]
html_theme = "alabaster"
html_static_path: list[str] = []

# --- the API reference ------------------------------------------------------------------------

_HERE = os.path.dirname(os.path.abspath(__file__))
_GENERATED = os.path.join(_HERE, "api", "generated")


def _write_api_pages() -> None:
    """One page per module of the package, each with its package's submodules in a toctree.

    Written afresh on every build (a module moved or deleted leaves no stale page; a new one
    is documented without editing anything here).
    """
    import pkgutil

    shutil.rmtree(_GENERATED, ignore_errors=True)
    os.makedirs(_GENERATED)
    names = ["viboost"] + [
        info.name
        for info in pkgutil.walk_packages(viboost.__path__, prefix="viboost.")
        if not info.name.endswith("__main__")
    ]
    for name in names:
        module = importlib.import_module(name)
        title = name.replace("_", r"\_")
        lines = [title, "=" * len(title), "", f".. automodule:: {name}", ""]
        if hasattr(module, "__path__"):
            children = sorted(n for n in names if n.rpartition(".")[0] == name)
            lines += [".. rubric:: Modules", "", ".. toctree::", "   :maxdepth: 1", ""]
            lines += [f"   {child}" for child in children] + [""]
        with open(os.path.join(_GENERATED, f"{name}.rst"), "w", encoding="utf-8") as out:
            out.write("\n".join(lines))


_write_api_pages()

autodoc_default_options = {
    "members": True,
    "undoc-members": True,
    "private-members": True,
    "show-inheritance": True,
    # A package's __all__ re-exports objects documented where they are defined; the package's
    # page documents only what it defines itself (references by the re-exported path resolve
    # through _resolve_reexport below).
    "ignore-module-all": True,
}
autodoc_member_order = "bysource"
# The numpydoc sections give the types; signatures stay plain (no guessing of annotation names).
autodoc_typehints = "none"
autodoc_preserve_defaults = True

numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False
numpydoc_attributes_as_param_list = True
numpydoc_validation_checks: set[str] = set()

myst_heading_anchors = 3
myst_enable_extensions = ["dollarmath"]

# --- nitpicky: every reference must resolve ---------------------------------------------------

nitpicky = True

# Other projects' objects, which only intersphinx (no network in CI) could link: the packages
# viboost uses, and the standard library and builtins.  None of these matches "viboost".
_EXTERNAL_PACKAGES = [
    "numpy", "np", "numpy.typing", "npt", "scipy", "sklearn", "pandas", "pd", "dask", "da", "dd",
    "distributed", "arviz", "az", "xarray", "xr", "matplotlib", "mpl", "plt", "shap", "numba",
    "nb", "joblib", "threadpoolctl", "tqdm", "pyarrow", "lightgbm", "xgboost", "cleanlab",
    "mpmath", "psutil", "pytest",
]
_STDLIB = sorted(set(sys.stdlib_module_names) - {"this", "antigravity"})
_BUILTINS = sorted(name for name in dir(builtins) if not name.startswith("_"))
_TYPING_NAMES = [
    # Names that numpydoc and autodoc leave bare (typing's generics and the usual spellings).
    "array-like", "array_like", "ArrayLike", "NDArray", "DTypeLike", "Any", "Callable",
    "Iterable", "Iterator", "Sequence", "Mapping", "Generator", "Optional", "Union", "Literal",
    "Self", "TypeVar", "Protocol", "ClassVar", "None", "optional", "callable", "path-like",
]


def _any_of(names: list[str]) -> str:
    return "|".join(map(re.escape, names))


nitpick_ignore_regex = [
    (r"py:.*", rf"({_any_of(_EXTERNAL_PACKAGES)})(\..+)?"),
    # A bare standard-library name only as a module: a relative viboost reference such as
    # :meth:`copy` must not be taken for one.
    (r"py:mod", rf"({_any_of(_STDLIB)})"),
    (r"py:.*", rf"({_any_of(_STDLIB)})\..+"),
    (r"py:.*", rf"({_any_of(_BUILTINS + _TYPING_NAMES)})"),
]

# The docs/*.md pages link to files outside docs/ (benchmarks/*.md, the README), which are no
# pages of this build: MyST cannot resolve those links.  Only links to such files that exist
# are let through (a link to a benchmark report that is not there still fails).
_ROOT = os.path.dirname(_HERE)
_OUTSIDE = sorted(
    os.path.splitext(os.path.relpath(os.path.join(folder, name), _ROOT))[0]
    for folder in (_ROOT, os.path.join(_ROOT, "benchmarks"))
    for name in os.listdir(folder)
    if name.endswith(".md")
)
nitpick_ignore_regex.append(("myst", rf"(.*/)?({_any_of(_OUTSIDE)})"))


# --- references by a re-exported or relative path ---------------------------------------------


def _import_path(path: str):
    """The object a dotted path names, by importing its longest module prefix; None if none."""
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        try:
            for part in parts[i:]:
                # On a class, the attribute as defined (a property, not its value).
                getter = inspect.getattr_static if isinstance(obj, type) else getattr
                obj = getter(obj, part)
        except AttributeError:
            return None
        return obj
    return None


def _canonical_name(obj) -> str | None:
    """Where an object is documented: its module's path and qualified name."""
    if isinstance(obj, types.ModuleType):
        return obj.__name__
    if isinstance(obj, (staticmethod, classmethod)):
        obj = obj.__func__
    if isinstance(obj, property):
        obj = obj.fget
    obj = getattr(obj, "py_func", obj)  # numba's dispatchers and viboost's ThreadedKernel
    module = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None)
    if isinstance(module, str) and isinstance(qualname, str) and "<locals>" not in qualname:
        return f"{module}.{qualname}"
    return None


def _resolve_reexport(app, env, node, contnode):
    """Resolve a Python reference that names a viboost object by another import path.

    ``viboost.dask.DaskVIBoostClassifier`` is documented where it is defined
    (``viboost.dask.estimator.DaskVIBoostClassifier``); a reference by the package's path, which
    names the same object, resolves to that entry.  A path that imports nothing, or an object
    not documented anywhere, stays unresolved (and fails the nitpicky build).
    """
    if node.get("refdomain") != "py":
        return None
    target = node.get("reftarget", "")
    module = node.get("py:module") or ""
    klass = node.get("py:class") or ""
    candidates = [target]
    if module:
        if klass:
            candidates.append(f"{module}.{klass}.{target}")
        candidates.append(f"{module}.{target}")
    domain = env.get_domain("py")
    for candidate in candidates:
        if not candidate.startswith("viboost"):
            continue
        obj = _import_path(candidate)
        if obj is None:
            continue
        canonical = _canonical_name(obj)
        if canonical is None or canonical == candidate or canonical not in domain.objects:
            continue
        return domain.resolve_xref(
            env, node["refdoc"], app.builder, node["reftype"], canonical, node, contnode
        ) or domain.resolve_any_xref(env, node["refdoc"], app.builder, canonical, node, contnode)
    return None


# --- what autodoc would otherwise miss or trip over -------------------------------------------


def _expose_compiled_kernels() -> None:
    """Let autodoc see the Python functions behind viboost's compiled kernels.

    A :class:`~viboost._utils.parallel.ThreadedKernel` (``@threaded_kernel``) and a numba
    ``@intrinsic`` are callable objects, not functions, so autodoc would leave them out (and
    every ``:func:`` to them unresolved).  For the documentation only, each module attribute
    that is one is replaced by the Python function it wraps (same name, docstring, signature).
    """
    import pkgutil

    from numba.core.extending import _Intrinsic

    from viboost._utils.parallel import ThreadedKernel

    for info in pkgutil.walk_packages(viboost.__path__, prefix="viboost."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for name, value in list(vars(module).items()):
            if getattr(value, "__module__", None) != info.name:
                continue  # imported from elsewhere: patched (or not) where it is defined
            if isinstance(value, ThreadedKernel):
                setattr(module, name, value.__wrapped__)
            elif isinstance(value, _Intrinsic):
                setattr(module, name, value._defn)


def _skip_foreign_members(app, what, name, obj, skip, options):
    """Leave out the methods scikit-learn adds to an estimator (``set_fit_request`` ...).

    Their docstrings are scikit-learn's and refer to its own glossary and labels.
    """
    module = getattr(getattr(obj, "__func__", obj), "__module__", None) or ""
    if callable(obj) and module.split(".")[0] == "sklearn":
        return True
    return None


def _plain_data_signature(app, what, name, obj, options, signature, return_annotation):
    """No signature for module data (a type alias is callable; numpydoc would give it one,
    which Sphinx 9.0 then fails to store: "list assignment index out of range")."""
    if what == "data":
        return (None, None)
    return None


def setup(app):
    _expose_compiled_kernels()
    app.connect("missing-reference", _resolve_reexport)
    app.connect("autodoc-skip-member", _skip_foreign_members)
    app.connect("autodoc-process-signature", _plain_data_signature, priority=100)
