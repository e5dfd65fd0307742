"""What every part of the description shares: the error envelope, the credentials, and
helpers that build a JSON reply, an operation and its parameters."""

from __future__ import annotations

from typing import Any

from parley.domain.wire import JSON

SCHEMAS: JSON = {
    "Error": {
        "type": "object",
        "description": "The OpenAI error envelope: every reply that is not a success.",
        "required": ["error"],
        "properties": {
            "error": {
                "type": "object",
                "required": ["message", "type", "param", "code"],
                "properties": {
                    "message": {"type": "string"},
                    "type": {"type": "string"},
                    "param": {"type": ["string", "null"]},
                    "code": {"type": ["string", "null"]},
                },
            }
        },
    },
}

SECURITY_SCHEMES: JSON = {
    "apiKey": {
        "type": "http",
        "scheme": "bearer",
        "description": "A key issued to a group: `Authorization: Bearer <key>`.",
    },
    "adminToken": {
        "type": "http",
        "scheme": "bearer",
        "description": "The operator's `admin.token` (without it the admin API answers 404). "
        "It acts as an owner.",
    },
    "adminAccount": {
        "type": "http",
        "scheme": "basic",
        "description": "An administrator account's name and password; its role limits the "
        "routes it may call (403 `insufficient_role` otherwise).",
    },
}

ERROR_REPLY: JSON = {
    "description": "The OpenAI error envelope, with the status that fits (400, 401, 404, "
    "408, 413, 415, 429, 502, 503, 504…).",
    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
}


def ref(name: str) -> JSON:
    return {"$ref": f"#/components/schemas/{name}"}


def json_reply(description: str, schema: JSON, status: str = "200") -> JSON:
    """Responses: ``status`` with ``schema``, and the envelope for everything else."""
    return {
        status: {"description": description, "content": {"application/json": {"schema": schema}}},
        "default": ERROR_REPLY,
    }


def path_param(name: str, kind: str = "string") -> JSON:
    return {"name": name, "in": "path", "required": True, "schema": {"type": kind}}


def query_param(
    name: str, schema: JSON | None = None, *, description: str = "", required: bool = False
) -> JSON:
    """A query parameter (a string unless ``schema`` says otherwise)."""
    param: JSON = {"name": name, "in": "query"}
    if required:
        param["required"] = True
    if description:
        param["description"] = description
    param["schema"] = {"type": "string"} if schema is None else schema
    return param


def json_body(schema: JSON) -> JSON:
    return {"required": True, "content": {"application/json": {"schema": schema}}}


def operation(
    operation_id: str, summary: str, responses: JSON, *, security: str = "apiKey", **more: Any
) -> JSON:
    return {
        "operationId": operation_id,
        "summary": summary,
        "security": [{security: []}],
        "responses": responses,
        **more,
    }


def list_of(name: str) -> JSON:
    """``{"object": "list", "data": [...]}`` of the schema ``name``."""
    return {
        "type": "object",
        "required": ["object", "data"],
        "properties": {"object": {"const": "list"}, "data": {"type": "array", "items": ref(name)}},
    }


def admin_operation(
    operation_id: str,
    summary: str,
    responses: JSON,
    *,
    role: str = "viewer",
    description: str = "",
    **more: Any,
) -> JSON:
    """An /admin operation: the admin token or an administrator account of ``role`` or
    higher, stated in the description and as ``x-required-role``
    (``tests/unit/test_openapi_roles.py`` holds it to ``parley.admin.roles``)."""
    needs = f"Needs the `{role}` role (an administrator account's, or the admin token)."
    return {
        "operationId": operation_id,
        "summary": summary,
        "description": f"{description}\n\n{needs}" if description else needs,
        "security": [{"adminToken": []}, {"adminAccount": []}],
        "x-required-role": role,
        "responses": responses,
        **more,
    }
