"""Parley's SigV4 signer against botocore's, for requests shaped like Bedrock's."""

from __future__ import annotations

from datetime import UTC, datetime
from unittest import mock

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials as BotoCredentials

from parley.providers.bedrock.sigv4 import Credentials, Signer, encode_segment

NOW = datetime(2026, 11, 25, 21, 4, 5, tzinfo=UTC)
KEYS = Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
TEMPORARY = Credentials(
    "ASIAEXAMPLE", "c2VjcmV0/c2VjcmV0+", "FwoGZXIvYXdzEJr//////////wEaDM+t0k3n=="
)


def botocore_headers(
    credentials: Credentials, region: str, url: str, body: bytes, now: datetime
) -> dict[str, str]:
    request = AWSRequest(
        method="POST", url=url, data=body, headers={"Content-Type": "application/json"}
    )
    boto = BotoCredentials(
        credentials.access_key_id, credentials.secret_access_key, credentials.session_token
    )
    with mock.patch("botocore.auth.get_current_datetime", return_value=now.replace(tzinfo=None)):
        SigV4Auth(boto, "bedrock", region).add_auth(request)
    return dict(request.headers.items())


CASES = [
    (KEYS, "us-east-1", "bedrock-runtime.us-east-1.amazonaws.com",
     "anthropic.claude-3-5-sonnet-20240620-v1:0", "converse", "", b'{"messages":[]}'),
    (KEYS, "eu-west-3", "bedrock-runtime.eu-west-3.amazonaws.com",
     "meta.llama3-70b-instruct-v1:0", "converse-stream", "", b"{}"),
    (TEMPORARY, "us-west-2", "bedrock-runtime.us-west-2.amazonaws.com",
     "arn:aws:bedrock:us-west-2:123456789012:inference-profile/us.anthropic.claude-v2:1",
     "converse", "", '{"text":"naïve ☃"}'.encode()),
    (KEYS, "ap-south-1", "127.0.0.1:8123", "amazon.nova-pro-v1:0", "converse",
     "b=2&a=x%20y", b"{}"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("credentials", "region", "host", "model", "action", "query", "body"), CASES
)
def test_the_signature_is_botocores(
    credentials: Credentials,
    region: str,
    host: str,
    model: str,
    action: str,
    query: str,
    body: bytes,
) -> None:
    path = f"/model/{encode_segment(model)}/{action}"
    scheme = "http" if host.startswith("127.") else "https"
    url = f"{scheme}://{host}{path}" + (f"?{query}" if query else "")
    ours = Signer(credentials, region, "bedrock").headers(
        "POST", host, path, query=query, body=body, content_type="application/json", now=NOW
    )
    theirs = botocore_headers(credentials, region, url, body, NOW)
    assert ours["Authorization"] == theirs["Authorization"]
    assert ours["X-Amz-Date"] == theirs["X-Amz-Date"] == "20261125T210405Z"
    assert ours.get("X-Amz-Security-Token") == theirs.get("X-Amz-Security-Token")


def test_a_model_id_is_encoded_on_the_wire() -> None:
    assert encode_segment("anthropic.claude-v2:1") == "anthropic.claude-v2%3A1"
    assert encode_segment("arn:aws:x/y") == "arn%3Aaws%3Ax%2Fy"


def sign(signer: Signer, body: bytes, now: datetime) -> dict[str, str]:
    return signer.headers(
        "POST", "h", "/a", query="", body=body, content_type="application/json", now=now
    )


def test_the_signing_key_changes_with_the_day_and_the_signature_with_the_body() -> None:
    signer = Signer(KEYS, "us-east-1", "bedrock")
    first = sign(signer, b"{}", NOW)
    other_body = sign(signer, b"{ }", NOW)
    next_day = sign(signer, b"{}", NOW.replace(day=26))
    signatures = {h["Authorization"] for h in (first, other_body, next_day)}
    assert len(signatures) == 3
    assert "20261126/us-east-1/bedrock/aws4_request" in next_day["Authorization"]


def test_the_secret_is_not_in_the_repr() -> None:
    assert KEYS.secret_access_key not in repr(KEYS)
    assert TEMPORARY.session_token not in repr(TEMPORARY)  # type: ignore[operator]
