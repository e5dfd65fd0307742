"""The relying party over real HTTP, against a small provider served here (discovery,
keys, token endpoint, userinfo, written from OpenID Connect Core and RFC 7636): what
Parley sends to exchange a code (the PKCE verifier, the client's credentials), what it
keeps (discovery, once), and what it refuses (a provider's error, a wrong issuer, an
answer too large); claims the ID token lacks are read from userinfo for its subject."""

from __future__ import annotations

import base64
import hashlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

import jwt
import pytest
from aiohttp import web
from cryptography.hazmat.primitives.asymmetric import rsa

from parley.admin.oidc import MAX_DOCUMENT_BYTES, Flow, OidcClient, OidcRefused
from parley.runtime_settings import OidcSettings

CLIENT_ID = "parley"
SECRET = "client:secret/with&odd=chars"


@dataclass
class Provider:
    issuer: str = ""
    key: rsa.RSAPrivateKey = field(
        default_factory=lambda: rsa.generate_private_key(public_exponent=65537, key_size=2048)
    )
    claims: dict[str, Any] = field(
        default_factory=lambda: {"groups": ["ops"], "preferred_username": "ada"}
    )
    userinfo: dict[str, Any] = field(default_factory=dict)
    challenge: str = ""
    nonce: str = ""
    token_requests: list[tuple[dict[str, list[str]], str]] = field(default_factory=list)
    hits: dict[str, int] = field(default_factory=dict)
    token_error: str | None = None
    discovery_issuer: str | None = None
    huge_keys: bool = False

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/.well-known/openid-configuration", self.discovery)
        app.router.add_get("/keys", self.keys)
        app.router.add_post("/token", self.token)
        app.router.add_get("/userinfo", self.user)
        return app

    def count(self, name: str) -> None:
        self.hits[name] = self.hits.get(name, 0) + 1

    async def discovery(self, _: web.Request) -> web.Response:
        self.count("discovery")
        return web.json_response(
            {
                "issuer": self.discovery_issuer or self.issuer,
                "authorization_endpoint": f"{self.issuer}/auth",
                "token_endpoint": f"{self.issuer}/token",
                "jwks_uri": f"{self.issuer}/keys",
                "userinfo_endpoint": f"{self.issuer}/userinfo",
                "id_token_signing_alg_values_supported": ["RS256"],
            }
        )

    async def keys(self, _: web.Request) -> web.StreamResponse:
        self.count("keys")
        if self.huge_keys:
            return web.Response(body=b" " * (MAX_DOCUMENT_BYTES + 10) + b"{}")
        jwk = jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key(), as_dict=True)
        return web.json_response({"keys": [{**jwk, "kid": "k1", "use": "sig"}]})

    async def token(self, request: web.Request) -> web.Response:
        form = parse_qs(await request.text())
        self.token_requests.append((form, request.headers.get("Authorization", "")))
        if self.token_error:
            return web.json_response({"error": self.token_error}, status=400)
        verifier = form["code_verifier"][0].encode()
        digest = base64.urlsafe_b64encode(hashlib.sha256(verifier).digest()).rstrip(b"=")
        if digest.decode() != self.challenge:
            return web.json_response({"error": "invalid_grant"}, status=400)
        now = int(time.time())
        body = {"iss": self.issuer, "sub": "u1", "aud": CLIENT_ID, "iat": now, "exp": now + 60}
        token = jwt.encode(
            {**body, "nonce": self.nonce, **self.claims}, self.key, "RS256", headers={"kid": "k1"}
        )
        return web.json_response({"id_token": token, "access_token": "at-1"})

    async def user(self, request: web.Request) -> web.Response:
        self.count("userinfo")
        assert request.headers["Authorization"] == "Bearer at-1"
        return web.json_response({"sub": "u1", **self.userinfo})


@pytest.fixture
async def provider() -> AsyncIterator[Provider]:
    served = Provider()
    runner = web.AppRunner(served.app())
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    served.issuer = f"http://127.0.0.1:{runner.addresses[0][1]}"
    yield served
    await runner.cleanup()


@pytest.fixture
async def client(provider: Provider) -> AsyncIterator[OidcClient]:
    settings = OidcSettings.model_validate(
        {
            "issuer": provider.issuer,
            "client_id": CLIENT_ID,
            "client_secret": SECRET,
            "roles": {"ops": "operator"},
            "redirect_base_url": "http://127.0.0.1:9",
        }
    )
    made = OidcClient(settings)
    yield made
    await made.close()


async def begin(client: OidcClient, provider: Provider) -> Flow:
    """A sign-in as the browser would start it: the provider keeps the challenge."""
    flow = Flow.new()
    query = parse_qs(urlsplit(await client.authorization_url(flow)).query)
    assert query["code_challenge_method"] == ["S256"] and query["response_type"] == ["code"]
    assert query["redirect_uri"] == ["http://127.0.0.1:9/admin/sso/callback"]
    assert "secret" not in str(query)
    provider.challenge, provider.nonce = query["code_challenge"][0], query["nonce"][0]
    assert query["state"] == [flow.state]
    return flow


async def test_a_code_is_exchanged_with_the_verifier_and_the_clients_secret(
    client: OidcClient, provider: Provider
) -> None:
    flow = await begin(client, provider)
    claims = await client.sign_in("code-1", flow)
    assert (claims["sub"], claims["groups"]) == ("u1", ["ops"])
    form, authorization = provider.token_requests[0]
    assert form["grant_type"] == ["authorization_code"] and form["code"] == ["code-1"]
    assert form["code_verifier"] == [flow.verifier] and "client_secret" not in form
    pair = base64.b64decode(authorization.removeprefix("Basic ")).decode()
    assert pair == "parley:client%3Asecret%2Fwith%26odd%3Dchars"  # RFC 6749 2.3.1
    await client.sign_in("code-2", await begin(client, provider))
    assert provider.hits == {"discovery": 1, "keys": 1}  # both kept


async def test_a_wrong_verifier_is_refused_by_the_provider(
    client: OidcClient, provider: Provider
) -> None:
    flow = await begin(client, provider)
    other = Flow(flow.state, flow.nonce, Flow.new().verifier)
    with pytest.raises(OidcRefused, match="invalid_grant"):
        await client.sign_in("code-1", other)


async def test_claims_the_id_token_lacks_come_from_userinfo_of_its_subject(
    client: OidcClient, provider: Provider
) -> None:
    provider.claims, provider.userinfo = {}, {"groups": ["ops"], "preferred_username": "ada"}
    claims = await client.sign_in("c", await begin(client, provider))
    assert (claims["groups"], claims["preferred_username"]) == (["ops"], "ada")
    provider.userinfo = {"sub": "someone-else", "groups": ["admins"]}
    with pytest.raises(OidcRefused, match="userinfo"):
        await client.sign_in("c", await begin(client, provider))


async def test_a_discovery_document_of_another_issuer_is_refused(
    client: OidcClient, provider: Provider
) -> None:
    provider.discovery_issuer = "https://evil.example.test"
    with pytest.raises(OidcRefused, match="issuer"):
        await client.authorization_url(Flow.new())


async def test_the_providers_error_and_an_oversized_answer_are_refusals(
    client: OidcClient, provider: Provider
) -> None:
    provider.token_error = "invalid_client"
    with pytest.raises(OidcRefused, match="invalid_client"):
        await client.sign_in("c", await begin(client, provider))
    provider.token_error, provider.huge_keys = None, True
    with pytest.raises(OidcRefused, match="too large"):
        await client.sign_in("c", await begin(client, provider))
