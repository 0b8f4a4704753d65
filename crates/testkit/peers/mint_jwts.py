"""Mints the OIDC tests' tokens with PyJWT (a third-party JWT library): three key sets
(before and after a rotation, and one key without a kid) and one token per case,
printed as one JSON object.

Usage: python mint_jwts.py ISSUER AUDIENCE
"""
import base64
import hashlib
import hmac
import json
import sys
import time

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

issuer, audience = sys.argv[1], sys.argv[2]
now = int(time.time())


def jwk_of(key, kid, alg):
    jwk = json.loads(jwt.algorithms.get_default_algorithms()[alg].to_jwk(key.public_key()))
    jwk.update({"kid": kid, "use": "sig", "alg": alg})
    return jwk


rsa1 = rsa.generate_private_key(public_exponent=65537, key_size=2048)
rsa2 = rsa.generate_private_key(public_exponent=65537, key_size=2048)
ec1 = ec.generate_private_key(ec.SECP256R1())


def claims(**over):
    base = {"iss": issuer, "aud": audience, "sub": "alice", "roles": ["operator"],
            "iat": now, "exp": now + 600}
    base.update(over)
    return {k: v for k, v in base.items() if v is not None}


def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def rs(payload, kid="k1", key=rsa1):
    return jwt.encode(payload, key, algorithm="RS256", headers={"kid": kid})


valid = rs(claims())
head, body, sig = valid.split(".")
tampered_body = b64(json.dumps(claims(sub="root", roles=["admin"])).encode())
public_pem = rsa1.public_key().public_bytes(
    serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
hs_head = b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": "k1"}).encode())
hs_body = b64(json.dumps(claims(roles=["admin"])).encode())
hs_sig = b64(hmac.new(public_pem, f"{hs_head}.{hs_body}".encode(), hashlib.sha256).digest())
none_head = b64(json.dumps({"alg": "none", "typ": "JWT", "kid": "k1"}).encode())

print(json.dumps({
    "jwks_before": {"keys": [jwk_of(rsa1, "k1", "RS256"), jwk_of(ec1, "e1", "ES256")]},
    "jwks_after": {"keys": [jwk_of(rsa2, "k2", "RS256"), jwk_of(ec1, "e1", "ES256")]},
    "valid": valid,
    "valid_es256": jwt.encode(claims(sub="sec", roles=["approver", "security"]), ec1,
                              algorithm="ES256", headers={"kid": "e1"}),
    "bad": {
        "wrong audience": rs(claims(aud="someone-else")),
        "wrong issuer": rs(claims(iss="https://evil.example")),
        "expired": rs(claims(exp=now - 600)),
        "not valid yet": rs(claims(nbf=now + 600)),
        "no exp": rs(claims(exp=None)),
        "alg none": f"{none_head}.{hs_body}.",
        "HS256 signed with the public key": f"{hs_head}.{hs_body}.{hs_sig}",
        "tampered payload": f"{head}.{tampered_body}.{sig}",
        "signed by another key under k1": rs(claims(), key=rsa2),
        "ES256 header on an RSA key": f"{b64(json.dumps({'alg': 'ES256', 'kid': 'k1'}).encode())}.{body}.{sig}",
        "hostile client id": rs(claims(sub="../x y")),
    },
    "rotated": rs(claims(sub="alice"), kid="k2", key=rsa2),
    # No kid: accepted only when the key set holds exactly one key.
    "no_kid": jwt.encode(claims(), rsa1, algorithm="RS256"),
    "no_kid_other_key": jwt.encode(claims(), rsa2, algorithm="RS256"),
    "jwks_single_no_kid": {"keys": [{k: v for k, v in jwk_of(rsa1, "k1", "RS256").items()
                                     if k != "kid"}]},
    "unknown_kids": [rs(claims(), kid=f"nope-{i}") for i in range(20)],
}))
