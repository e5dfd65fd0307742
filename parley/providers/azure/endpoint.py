"""Where an Azure OpenAI request goes and how it authenticates.

Azure OpenAI speaks OpenAI's wire format, so a channel of ``type: azure-openai`` is the
OpenAI adapter (its fast paths, stream translation and embeddings included) with this
``Endpoint``. With ``azure.api_version`` set, a call goes to the deployment named by
the channel's upstream model, ``{base_url}/openai/deployments/{deployment}{path}
?api-version={version}``; without, to the v1 endpoint, ``{base_url}/openai/v1{path}``,
where the body's ``model`` names the deployment. The channel's key goes in the
``api-key`` header, or, with ``azure.auth: bearer``, as a Microsoft Entra token in
``Authorization: Bearer``.

Azure's content filtering needs nothing of its own: a filtered completion ends with
``finish_reason: content_filter`` (OpenAI's own value), and a filtered prompt is a 400
whose ``code`` is ``content_filter``, relayed as the request's fault (with its message
and ``param``) like any 400.
"""

from __future__ import annotations

import functools
from urllib.parse import quote

from parley.catalog_settings import AzureSettings
from parley.http import Prepared, prepare
from parley.providers.base import Target

DEFAULTS = AzureSettings()
JSON_TYPE = "application/json"


class AzureEndpoint:
    """``Endpoint`` for Azure OpenAI's deployments and v1 URLs."""

    __slots__ = ()

    def head(self, target: Target, path: str, content_type: str = JSON_TYPE) -> Prepared:
        options = target.options if isinstance(target.options, AzureSettings) else DEFAULTS
        if content_type == JSON_TYPE:
            return _json_head(target.base_url, path, target.model, target.api_key, options)
        return _head(
            target.base_url, path, target.model, target.api_key, options, content_type=content_type
        )


@functools.cache
def _json_head(
    base_url: str, path: str, deployment: str, key: str | None, options: AzureSettings
) -> Prepared:
    """The request head, rendered once per channel, deployment, endpoint and key."""
    return _head(base_url, path, deployment, key, options, content_type=JSON_TYPE)


def _head(
    base_url: str,
    path: str,
    deployment: str,
    key: str | None,
    options: AzureSettings,
    *,
    content_type: str,
) -> Prepared:
    api_version, auth = options.api_version, options.auth
    if api_version is None:
        url = f"{base_url}/openai/v1{path}"
    else:
        name = quote(deployment, safe="")
        url = f"{base_url}/openai/deployments/{name}{path}?api-version={quote(api_version)}"
    headers = {"Content-Type": content_type, "Accept": "application/json, text/event-stream"}
    if key and auth == "bearer":
        headers["Authorization"] = f"Bearer {key}"
    elif key:
        headers["api-key"] = key
    return prepare("POST", url, headers)
