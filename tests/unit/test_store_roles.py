"""The store's roles: each consumer names the small Protocol it uses, never the whole Store.

``parley/store/base.py`` cuts the ``Store`` into roles (``KeyStore``, ``UsageStore``,
``VoiceStore``, ``ResponseStore``, ``ContentStore``, ``FileStore``, ``BatchStore``,
``ChannelStore``, ``ModelStore``, ``AccountStore``, ``AuditStore``, ``AdminStore``,
``CheckStore``, ``ClientSecretStore``);
``Store`` is all of them and the schema's lifecycle. Only what opens a store or hands
one out holds all of it.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import parley
from parley.store import base
from parley.store.sql import SqlStore

ROOT = Path(parley.__file__).parent
ROLES = (
    base.KeyStore,
    base.UsageStore,
    base.VoiceStore,
    base.ResponseStore,
    base.ContentStore,
    base.FileStore,
    base.BatchStore,
    base.ChannelStore,
    base.ModelStore,
    base.AccountStore,
    base.AuditStore,
    base.AdminStore,
    base.CheckStore,
    base.ClientSecretStore,
)
LIFECYCLE = {"migrate", "close"}
OWNERS = ("open_store(", "with_store(", "Services.start(")
"""What opening a store or handing one out looks like in a module's source."""


def _own_methods(protocol: type) -> set[str]:
    return {name for name, value in vars(protocol).items() if inspect.iscoroutinefunction(value)}


def test_every_store_method_belongs_to_exactly_one_role() -> None:
    declared: dict[str, str] = {}
    for role in ROLES:
        for name in _own_methods(role):
            assert name not in declared, f"{name} is in {declared.get(name)} and {role.__name__}"
            declared[name] = role.__name__
    assert _own_methods(base.Store) == LIFECYCLE
    everything = {name for klass in base.Store.__mro__ for name in _own_methods(klass)}
    assert everything == set(declared) | LIFECYCLE


def test_the_sql_store_implements_every_role() -> None:
    for role in (*ROLES, base.Store):
        for name in _own_methods(role):
            assert inspect.iscoroutinefunction(getattr(SqlStore, name, None)), name


def _names_the_whole_store(tree: ast.AST) -> bool:
    return any(isinstance(node, ast.Name) and node.id == "Store" for node in ast.walk(tree))


def test_only_what_opens_a_store_names_all_of_it() -> None:
    offenders = []
    for path in sorted(ROOT.rglob("*.py")):
        if path.is_relative_to(ROOT / "store"):
            continue
        source = path.read_text()
        if _names_the_whole_store(ast.parse(source)) and not any(o in source for o in OWNERS):
            offenders.append(str(path.relative_to(ROOT)))
    assert offenders == [], f"name the role the module uses, not the whole Store: {offenders}"
