"""The ID token checks of single sign-on, with keys made here: a token is accepted only
with the provider's signature, this dashboard's audience and issuer, a time not past
and the sign-in's nonce; the provider's keys are fetched again when it rotates them, at
most once a while; a sign-in's answer is accepted once, from the browser that began it."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from parley.admin.oidc import Discovery, Flow, OidcRefused, SigningKeys, verify_id_token
from parley.admin.sso import Flows

ISSUER = "https://id.example.test/realms/staff"
CLIENT = "parley-dashboard"
NONCE = "nonce-of-this-sign-in"
RS256 = frozenset({"RS256"})


def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def public_jwk(private: Any, kid: str, **extra: str) -> dict[str, Any]:
    jwk: dict[str, Any] = jwt.algorithms.RSAAlgorithm.to_jwk(private.public_key(), as_dict=True)
    return {**jwk, "kid": kid, "use": "sig", **extra}


def id_token(private: Any, kid: str = "k1", algorithm: str = "RS256", **claims: Any) -> str:
    now = int(time.time())
    body = {
        "iss": ISSUER,
        "sub": "user-42",
        "aud": CLIENT,
        "iat": now,
        "exp": now + 300,
        "nonce": NONCE,
        **claims,
    }
    return jwt.encode(body, private, algorithm=algorithm, headers={"kid": kid})


def check(token: str, key: Mapping[str, Any], **overrides: Any) -> dict[str, Any]:
    options = {"issuer": ISSUER, "client_id": CLIENT, "nonce": NONCE, "algorithms": RS256}
    return verify_id_token(token, key, **{**options, **overrides})


def refused(token: str, key: Mapping[str, Any], **overrides: Any) -> str:
    with pytest.raises(OidcRefused) as caught:
        check(token, key, **overrides)
    return caught.value.reason


def test_a_right_token_gives_its_claims() -> None:
    private = rsa_key()
    claims = check(id_token(private, groups=["ops"]), public_jwk(private, "k1"))
    assert (claims["sub"], claims["groups"]) == ("user-42", ["ops"])


def test_a_token_signed_by_another_key_is_refused() -> None:
    forged = id_token(rsa_key())  # the right key id, someone else's key
    assert "signature" in refused(forged, public_jwk(rsa_key(), "k1"))


def test_a_token_with_a_changed_claim_is_refused() -> None:
    private = rsa_key()
    header, body, signature = id_token(private).split(".")
    other = id_token(private, sub="user-1").split(".")[1]
    assert "signature" in refused(f"{header}.{other}.{signature}", public_jwk(private, "k1"))
    assert body != other


def test_a_token_for_another_client_is_refused() -> None:
    private = rsa_key()
    assert "aud" in refused(id_token(private, aud="someone-else"), public_jwk(private, "k1"))


def test_several_audiences_need_this_client_as_azp() -> None:
    private = rsa_key()
    key = public_jwk(private, "k1")
    both = [CLIENT, "other"]
    assert "azp" in refused(id_token(private, aud=both), key)
    assert check(id_token(private, aud=both, azp=CLIENT), key)["azp"] == CLIENT


def test_a_token_of_another_issuer_is_refused() -> None:
    private = rsa_key()
    assert "iss" in refused(id_token(private, iss="https://evil.test"), public_jwk(private, "k1"))


def test_an_expired_token_is_refused() -> None:
    private = rsa_key()
    past = int(time.time()) - 3600
    token = id_token(private, iat=past - 300, exp=past)
    assert "expired" in refused(token, public_jwk(private, "k1"))


def test_a_token_of_another_sign_in_is_refused_by_its_nonce() -> None:
    private = rsa_key()
    key = public_jwk(private, "k1")
    assert "nonce" in refused(id_token(private, nonce="an-older-sign-in"), key)
    token = id_token(private)
    del_nonce = jwt.decode(token, options={"verify_signature": False})
    del del_nonce["nonce"]
    bare = jwt.encode(del_nonce, private, algorithm="RS256", headers={"kid": "k1"})
    assert "nonce" in refused(bare, key)


def test_a_token_without_an_expiry_is_refused() -> None:
    private = rsa_key()
    body = {"iss": ISSUER, "sub": "u", "aud": CLIENT, "iat": int(time.time()), "nonce": NONCE}
    token = jwt.encode(body, private, algorithm="RS256", headers={"kid": "k1"})
    assert "not valid" in refused(token, public_jwk(private, "k1"))


def test_unsigned_and_hmac_tokens_are_refused() -> None:
    private = rsa_key()
    key = public_jwk(private, "k1")
    claims = jwt.decode(id_token(private), options={"verify_signature": False})
    unsigned = jwt.encode(claims, None, algorithm="none", headers={"kid": "k1"})
    assert "'none'" in refused(unsigned, key, algorithms=frozenset({"RS256", "none"}))
    hmac_token = jwt.encode(claims, "s" * 32, algorithm="HS256", headers={"kid": "k1"})
    assert "'HS256'" in refused(hmac_token, key, algorithms=frozenset({"RS256", "HS256"}))


def test_an_algorithm_the_provider_does_not_announce_is_refused() -> None:
    private = ec.generate_private_key(ec.SECP256R1())
    token = id_token(private, algorithm="ES256")
    jwk: dict[str, Any] = jwt.algorithms.ECAlgorithm.to_jwk(private.public_key(), as_dict=True)
    assert "'ES256'" in refused(token, {**jwk, "kid": "k1"})
    claims = check(token, {**jwk, "kid": "k1"}, algorithms=frozenset({"RS256", "ES256"}))
    assert claims["sub"] == "user-42"


def test_a_key_made_for_another_algorithm_is_refused() -> None:
    private = rsa_key()
    key = public_jwk(private, "k1", alg="RS512")
    assert "algorithm" in refused(id_token(private), key)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Provider:
    """The provider's key set, as its ``jwks_uri`` serves it, counted."""

    def __init__(self, *keys: dict[str, Any]) -> None:
        self.keys = list(keys)

    async def __call__(self) -> Mapping[str, Any]:
        return {"keys": list(self.keys)}


async def test_a_rotated_key_is_fetched_when_a_token_names_it() -> None:
    old, new = rsa_key(), rsa_key()
    provider, clock = Provider(public_jwk(old, "k1")), Clock()
    keys = SigningKeys(provider, clock=clock, refetch_after=30)
    assert (await keys.key("k1"))["kid"] == "k1"
    clock.now += 31
    provider.keys = [public_jwk(new, "k2")]  # the provider rotated
    assert check(id_token(new, kid="k2"), await keys.key("k2"))["sub"] == "user-42"
    assert keys.fetches == 2


async def test_unknown_key_ids_fetch_the_keys_again_at_most_once_a_while() -> None:
    provider, clock = Provider(public_jwk(rsa_key(), "k1")), Clock()
    keys = SigningKeys(provider, clock=clock, refetch_after=30)
    await keys.key("k1")
    clock.now += 31
    for made_up in ("x1", "x2", "x3", "x4"):
        with pytest.raises(OidcRefused, match="does not publish"):
            await keys.key(made_up)
    assert keys.fetches == 2  # the first, and one more for the four unknown ids
    clock.now += 31
    with pytest.raises(OidcRefused):
        await keys.key("x5")
    assert keys.fetches == 3


async def test_the_keys_are_kept_for_a_while_then_fetched_again() -> None:
    provider, clock = Provider(public_jwk(rsa_key(), "k1")), Clock()
    keys = SigningKeys(provider, clock=clock, max_age=3600)
    for _ in range(5):
        await keys.key("k1")
    assert keys.fetches == 1
    clock.now += 3600
    await keys.key("k1")
    assert keys.fetches == 2


async def test_a_token_without_a_key_id_takes_the_only_key_and_no_other() -> None:
    provider = Provider(public_jwk(rsa_key(), "k1"))
    keys = SigningKeys(provider)
    assert (await keys.key(None))["kid"] == "k1"
    provider.keys.append(public_jwk(rsa_key(), "k2"))
    two = SigningKeys(provider)
    with pytest.raises(OidcRefused):
        await two.key(None)


async def test_encryption_keys_are_not_signing_keys() -> None:
    keys = SigningKeys(Provider(public_jwk(rsa_key(), "e1", use="enc")))
    with pytest.raises(OidcRefused):
        await keys.key("e1")


def test_discovery_must_name_the_configured_issuer() -> None:
    document = {
        "issuer": ISSUER,
        "authorization_endpoint": f"{ISSUER}/auth",
        "token_endpoint": f"{ISSUER}/token",
        "jwks_uri": f"{ISSUER}/certs",
        "id_token_signing_alg_values_supported": ["RS256", "HS256", "none"],
    }
    assert Discovery.parse(document, ISSUER).algorithms == {"RS256"}
    with pytest.raises(OidcRefused, match="issuer"):
        Discovery.parse({**document, "issuer": "https://evil.test"}, ISSUER)
    with pytest.raises(OidcRefused, match="jwks_uri"):
        Discovery.parse({**document, "jwks_uri": None}, ISSUER)


def test_pkce_challenge_is_s256_of_the_verifier() -> None:
    # RFC 7636, appendix B
    flow = Flow("s", "n", "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk")
    assert flow.challenge == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
    assert len({Flow.new().state for _ in range(5)}) == 5


def test_an_answer_is_accepted_once() -> None:
    flows = Flows("admin-token-for-tests-0123456789")
    flow = Flow.new()
    cookie = flows.seal(flow)
    assert flows.answer(cookie, flow.state) == flow
    with pytest.raises(OidcRefused, match="replayed"):
        flows.answer(cookie, flow.state)


def test_an_answer_must_carry_the_state_of_this_browsers_sign_in() -> None:
    flows = Flows("admin-token-for-tests-0123456789")
    mine, theirs = Flow.new(), Flow.new()
    with pytest.raises(OidcRefused, match="state"):
        flows.answer(flows.seal(mine), theirs.state)
    with pytest.raises(OidcRefused, match="state"):
        flows.answer(flows.seal(mine), None)
    with pytest.raises(OidcRefused, match="did not start here"):
        flows.answer(None, mine.state)
    other_gateway = Flows("another-admin-token-0123456789")
    with pytest.raises(OidcRefused, match="did not start here"):
        flows.answer(other_gateway.seal(mine), mine.state)


def test_an_answer_that_took_too_long_is_refused() -> None:
    flows = Flows("admin-token-for-tests-0123456789", max_age=-1)
    flow = Flow.new()
    with pytest.raises(OidcRefused, match="too long"):
        flows.answer(flows.seal(flow), flow.state)


def test_a_header_whose_algorithm_or_key_id_is_not_a_string_is_refused() -> None:
    """A token's header is the provider's JSON, read before any signature is checked: a
    value of another type is a refusal, never an error of Parley's."""
    import base64
    import json

    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    key = public_jwk(rsa_key(), "k1")
    for header in ({"alg": ["RS256"], "kid": "k1"}, {"alg": "RS256", "kid": {"k": 1}}):
        token = f"{part(header)}.{part({'sub': 'x'})}.c2ln"
        assert "not a string" in refused(token, key) or "not a JSON Web Token" in refused(
            token, key
        )
