"""An identity provider's published keys for scripts/bench: an RSA key (openssl made it) as a
JWKS, the way Auth0 or Keycloak publishes theirs.

  python3 jwks.py <private key PEM> <kid> > jwks.json
"""

import base64
import json
import sys

from cryptography.hazmat.primitives.serialization import load_pem_private_key


def b64(n):
    raw = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


numbers = load_pem_private_key(open(sys.argv[1], "rb").read(), None).public_key().public_numbers()
key = {"kty": "RSA", "use": "sig", "alg": "RS256", "kid": sys.argv[2], "n": b64(numbers.n), "e": b64(numbers.e)}
print(json.dumps({"keys": [key]}))
