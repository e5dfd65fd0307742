"""/v1/dashboard/billing/* (``parley.api.billing``)."""

from __future__ import annotations

from parley.domain.wire import JSON
from parley.openapi.components import json_reply, operation, query_param, ref

_DATE = {"type": "string", "format": "date", "description": "YYYY-MM-DD"}
_DATE_OR_DEFAULT = {
    "description": "YYYY-MM-DD; absent or empty for the default (this month to tomorrow)",
    "anyOf": [_DATE, {"type": "string", "maxLength": 0}],
}

SCHEMAS: JSON = {
    "Quota": {
        "type": "object",
        "required": ["object", "group", "budget"],
        "properties": {
            "object": {"const": "billing_quota"},
            "group": {"type": "string"},
            "rpm": {"type": ["integer", "null"]},
            "tpm": {"type": ["integer", "null"]},
            "requests": {"type": ["object", "null"]},
            "tokens": {"type": ["object", "null"]},
            "budget": {"type": "object"},
            "key_budget": {
                "type": ["object", "null"],
                "description": "The key's own budget this period, when it has one.",
            },
        },
    },
    "UsageReport": {
        "type": "object",
        "required": ["object", "start_date", "end_date", "daily_costs", "total_usage"],
        "properties": {
            "object": {"const": "list"},
            "start_date": _DATE,
            "end_date": _DATE,
            "daily_costs": {"type": "array", "items": {"type": "object"}},
            "total_usage": {"type": "number", "description": "In cents."},
            "totals": {"type": "object"},
        },
    },
    "Subscription": {
        "type": "object",
        "required": ["object", "hard_limit_usd"],
        "properties": {
            "object": {"const": "billing_subscription"},
            "has_payment_method": {"type": "boolean"},
            "soft_limit_usd": {"type": "number"},
            "hard_limit_usd": {"type": "number"},
            "system_hard_limit_usd": {"type": "number"},
            "access_until": {"type": "integer"},
        },
    },
}

PATHS: JSON = {
    "/v1/dashboard/billing/quota": {
        "get": operation(
            "billingQuota",
            "The group's limits and what is left of them now",
            json_reply("The quota", ref("Quota")),
        )
    },
    "/v1/dashboard/billing/usage": {
        "get": operation(
            "billingUsage",
            "Spend and usage per day and model (end date exclusive, at most 366 days)",
            json_reply("The usage", ref("UsageReport")),
            parameters=[
                query_param("start_date", _DATE_OR_DEFAULT),
                query_param("end_date", _DATE_OR_DEFAULT),
            ],
        )
    },
    "/v1/dashboard/billing/subscription": {
        "get": operation(
            "billingSubscription",
            "one-api's subscription shape, for the clients that read it",
            json_reply("The subscription", ref("Subscription")),
        )
    },
}
