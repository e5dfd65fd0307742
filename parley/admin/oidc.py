"""The OpenID Connect relying party behind the dashboard's single sign-on: the provider's
discovery document and signing keys, the authorization request (``state``, ``nonce``
and a PKCE S256 verifier), the code exchange, and the ID token's checks.

* Discovery (``<issuer>/.well-known/openid-configuration``) is fetched by the first
  sign-in and kept ``DISCOVERY_SECONDS``; its ``issuer`` must be the configured one.
  Nothing here runs on a ``/v1`` call: only ``/admin/sso/…`` reaches it.
* The keys (``jwks_uri``) are kept ``KEYS_SECONDS``. A token signed with a key id not
  among them fetches them again (the provider rotated its keys), at most once every
  ``REFETCH_SECONDS``, so tokens with made-up key ids cannot make Parley hammer the
  provider.
* An ID token is accepted only signed with an asymmetric algorithm the provider
  announces (never ``none`` nor an HMAC), by a key of the provider, with the configured
  ``iss``, ``aud`` containing the client id (``azp`` the client id where there are
  several audiences), not expired (``LEEWAY_SECONDS`` of clock skew), and the ``nonce``
  of the sign-in that asked for it.
* The client secret is sent as HTTP Basic credentials (``client_secret_basic``) and is
  never logged nor shown; a client without one is a public client (PKCE alone).

Every refusal is an ``OidcRefused`` whose message says what was wrong for the page and
the audit log, and never holds a token.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

import aiohttp
import jwt
import orjson

from parley.runtime_settings import OidcSettings

DISCOVERY_SECONDS = 3600.0
KEYS_SECONDS = 3600.0
REFETCH_SECONDS = 30.0
LEEWAY_SECONDS = 60
FETCH_TIMEOUT_SECONDS = 10.0
MAX_DOCUMENT_BYTES = 1024 * 1024
ALGORITHMS = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)
"""The signatures accepted: asymmetric ones only."""

Fetch = Callable[[], Awaitable[Mapping[str, Any]]]


class OidcRefused(Exception):
    """A sign-in refused, with the reason in words (no token, no secret)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Discovery:
    """What Parley needs of the provider's discovery document."""

    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    jwks_uri: str
    userinfo_endpoint: str | None
    algorithms: frozenset[str]

    @classmethod
    def parse(cls, document: Mapping[str, Any], issuer: str) -> Discovery:
        if document.get("issuer") != issuer:
            raise OidcRefused(
                f"The provider's discovery document names the issuer "
                f"{str(document.get('issuer'))[:200]!r}, not the configured {issuer!r}."
            )
        urls = {}
        for name in ("authorization_endpoint", "token_endpoint", "jwks_uri"):
            value = document.get(name)
            if not isinstance(value, str) or not value.startswith(("https://", "http://")):
                raise OidcRefused(f"The provider's discovery document has no {name}.")
            urls[name] = value
        userinfo = document.get("userinfo_endpoint")
        announced = document.get("id_token_signing_alg_values_supported") or ["RS256"]
        algorithms = frozenset(a for a in announced if isinstance(a, str)) & ALGORITHMS
        if not algorithms:
            raise OidcRefused("The provider signs ID tokens with no algorithm Parley accepts.")
        return cls(
            issuer=issuer,
            userinfo_endpoint=userinfo if isinstance(userinfo, str) else None,
            algorithms=algorithms,
            **urls,
        )


class SigningKeys:
    """The provider's public keys by key id, fetched again on an unknown one (rotation)
    at most once every ``REFETCH_SECONDS``."""

    def __init__(
        self,
        fetch: Fetch,
        *,
        clock: Callable[[], float] = time.monotonic,
        max_age: float = KEYS_SECONDS,
        refetch_after: float = REFETCH_SECONDS,
    ) -> None:
        self._fetch = fetch
        self._clock = clock
        self._max_age = max_age
        self._refetch_after = refetch_after
        self._keys: dict[str | None, dict[str, Any]] = {}
        self._fetched_at: float | None = None
        self._lock = asyncio.Lock()
        self.fetches = 0
        """How many times the keys were fetched (for tests and the curious)."""

    async def key(self, kid: str | None) -> dict[str, Any]:
        """The JWK of ``kid`` (the only signing key, when the token names none)."""
        async with self._lock:
            now = self._clock()
            if self._fetched_at is None or now - self._fetched_at >= self._max_age:
                await self._load()
            found = self._find(kid)
            if found is None and self._clock() - (self._fetched_at or 0.0) >= self._refetch_after:
                await self._load()
                found = self._find(kid)
        if found is None:
            raise OidcRefused("The ID token is signed with a key the provider does not publish.")
        return found

    def _find(self, kid: str | None) -> dict[str, Any] | None:
        if kid is not None:
            return self._keys.get(kid)
        return next(iter(self._keys.values())) if len(self._keys) == 1 else None

    async def _load(self) -> None:
        document = await self._fetch()
        self.fetches += 1
        self._fetched_at = self._clock()
        keys = document.get("keys")
        self._keys = {
            key.get("kid"): key
            for key in (keys if isinstance(keys, list) else ())
            if isinstance(key, dict)
            and key.get("use", "sig") == "sig"
            and isinstance(key.get("kid", ""), str)
        }


@dataclass(frozen=True, slots=True)
class Flow:
    """One sign-in between the redirect to the provider and its answer."""

    state: str
    nonce: str
    verifier: str

    @classmethod
    def new(cls) -> Flow:
        return cls(secrets.token_urlsafe(32), secrets.token_urlsafe(32), secrets.token_urlsafe(48))

    @property
    def challenge(self) -> str:
        """PKCE S256: the verifier's SHA-256, base64url without padding."""
        digest = hashlib.sha256(self.verifier.encode("ascii")).digest()
        return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def verify_id_token(
    token: str,
    key: Mapping[str, Any],
    *,
    issuer: str,
    client_id: str,
    nonce: str,
    algorithms: frozenset[str],
) -> dict[str, Any]:
    """The claims of ``token`` if its signature by ``key`` and every claim the sign-in
    relies on are right; else ``OidcRefused`` saying what is wrong."""
    algorithm = header_of(token).get("alg")
    if algorithm not in algorithms or algorithm not in ALGORITHMS:
        raise OidcRefused(f"The ID token is signed with {str(algorithm)[:20]!r}, not accepted.")
    if key.get("alg") not in (None, algorithm):
        raise OidcRefused("The ID token's algorithm is not its key's.")
    try:
        public = jwt.PyJWK(dict(key), algorithm=algorithm).key
        claims: dict[str, Any] = jwt.decode(
            token,
            public,
            algorithms=[algorithm],
            audience=client_id,
            issuer=issuer,
            leeway=LEEWAY_SECONDS,
            options={"require": ["iss", "sub", "aud", "exp", "iat"], "verify_iat": False},
        )
    except jwt.ExpiredSignatureError:
        raise OidcRefused("The ID token has expired.") from None
    except jwt.InvalidAudienceError:
        raise OidcRefused("The ID token was not issued to this dashboard (aud).") from None
    except jwt.InvalidIssuerError:
        raise OidcRefused("The ID token comes from another issuer (iss).") from None
    except jwt.InvalidSignatureError:
        raise OidcRefused("The ID token's signature is wrong.") from None
    except (jwt.PyJWTError, ValueError) as error:
        raise OidcRefused(f"The ID token is not valid ({type(error).__name__}).") from None
    audiences = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
    if len(audiences) > 1 and claims.get("azp") != client_id:
        raise OidcRefused("The ID token names several audiences and not this one as azp.")
    given = claims.get("nonce")
    if not isinstance(given, str) or not hmac.compare_digest(given.encode(), nonce.encode()):
        raise OidcRefused("The ID token's nonce is not this sign-in's.")
    if not isinstance(claims.get("sub"), str) or not claims["sub"]:
        raise OidcRefused("The ID token has no subject (sub).")
    return claims


def header_of(token: str) -> dict[str, Any]:
    try:
        header: dict[str, Any] = jwt.get_unverified_header(token)
    except jwt.PyJWTError:
        raise OidcRefused("The ID token is not a JSON Web Token.") from None
    for name in ("alg", "kid"):
        if not isinstance(header.get(name, ""), str):
            raise OidcRefused(f"The ID token's header has a `{name}` that is not a string.")
    return header


class OidcClient:
    """The relying party of one provider (``admin.oidc``): discovery, keys, the
    authorization URL, the code exchange and the verified claims."""

    def __init__(self, settings: OidcSettings, clock: Callable[[], float] = time.monotonic):
        self.settings = settings
        self._clock = clock
        self._discovery: Discovery | None = None
        self._discovered_at = 0.0
        self._discovery_lock = asyncio.Lock()
        self._session: aiohttp.ClientSession | None = None
        self.keys = SigningKeys(self._fetch_keys, clock=clock)

    async def discovery(self) -> Discovery:
        async with self._discovery_lock:
            stale = self._clock() - self._discovered_at >= DISCOVERY_SECONDS
            if self._discovery is None or stale:
                url = f"{self.settings.issuer.rstrip('/')}/.well-known/openid-configuration"
                self._discovery = Discovery.parse(await self._get(url), self.settings.issuer)
                self._discovered_at = self._clock()
            return self._discovery

    async def authorization_url(self, flow: Flow) -> str:
        found = await self.discovery()
        query = urlencode(
            {
                "response_type": "code",
                "client_id": self.settings.client_id,
                "redirect_uri": self.settings.redirect_uri,
                "scope": " ".join(self.settings.scopes),
                "state": flow.state,
                "nonce": flow.nonce,
                "code_challenge": flow.challenge,
                "code_challenge_method": "S256",
            }
        )
        joiner = "&" if "?" in found.authorization_endpoint else "?"
        return f"{found.authorization_endpoint}{joiner}{query}"

    async def sign_in(self, code: str, flow: Flow) -> dict[str, Any]:
        """Exchange ``code`` and return the verified claims of the ID token (with the
        userinfo's added where the ID token lacks the role or the name claim)."""
        found = await self.discovery()
        tokens = await self._exchange(found, code, flow)
        id_token = tokens.get("id_token")
        if not isinstance(id_token, str):
            raise OidcRefused("The provider's token answer has no ID token.")
        key = await self.keys.key(header_of(id_token).get("kid"))
        claims = verify_id_token(
            id_token,
            key,
            issuer=found.issuer,
            client_id=self.settings.client_id,
            nonce=flow.nonce,
            algorithms=found.algorithms,
        )
        access = tokens.get("access_token")
        wanted = (self.settings.role_claim.split(".")[0], self.settings.username_claim)
        lacking = any(name not in claims for name in wanted)
        if lacking and found.userinfo_endpoint and isinstance(access, str):
            claims = {**await self._userinfo(found.userinfo_endpoint, access, claims), **claims}
        return claims

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _exchange(self, found: Discovery, code: str, flow: Flow) -> Mapping[str, Any]:
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": self.settings.redirect_uri,
            "code_verifier": flow.verifier,
        }
        headers = {"Accept": "application/json"}
        secret = self.settings.client_secret
        if secret is None:
            form["client_id"] = self.settings.client_id
        else:  # RFC 6749 2.3.1: each half form-encoded, then Basic
            pair = f"{quote(self.settings.client_id, safe='')}:"
            pair += quote(secret.get_secret_value(), safe="")
            headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
        session = self._client()
        try:
            async with session.post(found.token_endpoint, data=form, headers=headers) as reply:
                body = await self._json(reply)
                if reply.status != 200:
                    error = str(body.get("error", reply.status))[:100]
                    raise OidcRefused(f"The provider refused the sign-in's code ({error}).")
                return body
        except (aiohttp.ClientError, TimeoutError):
            raise OidcRefused("The provider could not be reached to finish the sign-in.") from None

    async def _userinfo(
        self, url: str, access_token: str, claims: Mapping[str, Any]
    ) -> Mapping[str, Any]:
        headers = {"Authorization": f"Bearer {access_token}", "Accept": "application/json"}
        try:
            async with self._client().get(url, headers=headers) as reply:
                info = await self._json(reply)
        except (aiohttp.ClientError, TimeoutError):
            raise OidcRefused("The provider's userinfo could not be read.") from None
        if reply.status != 200 or info.get("sub") != claims["sub"]:
            raise OidcRefused("The provider's userinfo is not the ID token's subject's.")
        return info

    async def _fetch_keys(self) -> Mapping[str, Any]:
        return await self._get((await self.discovery()).jwks_uri)

    async def _get(self, url: str) -> Mapping[str, Any]:
        try:
            async with self._client().get(url, headers={"Accept": "application/json"}) as reply:
                body = await self._json(reply)
        except (aiohttp.ClientError, TimeoutError):
            raise OidcRefused("The single sign-on provider cannot be reached.") from None
        if reply.status != 200:
            raise OidcRefused(f"The single sign-on provider answered {reply.status}.")
        return body

    @staticmethod
    async def _json(reply: aiohttp.ClientResponse) -> Mapping[str, Any]:
        raw = bytearray()
        async for chunk in reply.content.iter_chunked(64 * 1024):
            raw += chunk
            if len(raw) > MAX_DOCUMENT_BYTES:
                raise OidcRefused("The provider's answer is too large.")
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise OidcRefused("The provider's answer is not JSON.") from None
        if not isinstance(body, dict):
            raise OidcRefused("The provider's answer is not a JSON object.")
        return body

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            timeout = aiohttp.ClientTimeout(total=FETCH_TIMEOUT_SECONDS)
            self._session = aiohttp.ClientSession(timeout=timeout)
        return self._session
