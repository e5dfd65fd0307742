"""Each /admin operation in the OpenAPI description names the role the gate asks for.

The description is written by hand (``parley.openapi`` imports nothing of ``admin``);
``parley.admin.roles`` is the table ``site.gate`` checks. This holds the two together.
"""

from __future__ import annotations

from parley.admin.roles import needed
from parley.openapi import document


def admin_operations() -> list[tuple[str, str, dict[str, object]]]:
    return [
        (method, path, op)
        for path, item in document()["paths"].items()
        if path.startswith("/admin/")
        for method, op in item.items()
    ]


def test_every_admin_operation_states_the_role_the_gate_requires() -> None:
    found = admin_operations()
    assert len(found) == 47
    wrong = [
        (method, path, op["x-required-role"])
        for method, path, op in found
        if op["x-required-role"] != needed(method.upper(), path.removeprefix("/admin"))
    ]
    assert wrong == []


def test_the_role_is_said_in_the_description_too() -> None:
    for _, _, op in admin_operations():
        assert f"Needs the `{op['x-required-role']}` role" in str(op["description"])


def test_the_three_roles_are_all_described() -> None:
    roles = {op["x-required-role"] for _, _, op in admin_operations()}
    assert roles == {"viewer", "operator", "owner"}
