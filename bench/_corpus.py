"""A seeded mixed corpus with planted secrets, for the scrubber against detect-secrets (P5).

`corpus(size, secrets, seed)` builds documents of six kinds -- prose, JSON,
application logs, Python code, config files (``.env``/INI/YAML), CSV -- each a
few KB to ~64 KB, with secrets planted where they turn up in real text: a
config assignment, a JSON value, a log line's header, a code string literal, a
sentence. Every planted secret is random (no two alike), and each `Document`
records where its secrets are (character spans), so recall can be counted by
overlap.

Planted kinds are those *both* tools are built to find -- each has a
detect-secrets default plugin and a ghost detector (``kind: ghost detector /
detect-secrets plugin``):

* AWS access key ids (``AKIA…``): aws_access_key_id / AWSKeyDetector
* GitHub tokens (``ghp_``/``gho_``/``ghs_`` + 36): github_token / GitHubTokenDetector
* Slack tokens (``xoxb-…``/``xoxp-…``): slack_token / SlackDetector
* Stripe keys (``sk_live_``/``rk_live_`` + 24): stripe_key / StripeDetector
* OpenAI keys (``sk-…T3BlbkFJ…``, also ``sk-proj-``): openai_api_key / OpenAIDetector
* PEM private key blocks (RSA, EC, OpenSSH, PKCS#8): private_key / PrivateKeyDetector
* JWTs (JSON header and payload, random signature): jwt / JwtTokenDetector
* URL credentials with a random password (``postgres://app:<pw>@db…``, often in a
  ``DATABASE_URL = …`` assignment): url_credentials / BasicAuthDetector (and
  KeywordDetector, entropy)
* bearer tokens (``Authorization: Bearer <random>``): bearer_token / the
  entropy and keyword plugins (detect-secrets has no bearer plugin of its own)

Not planted: kinds only one tool looks for (PII such as e-mail addresses, cards
and phone numbers -- ghost only; bare ``password = "…"`` assignments, npm,
Twilio, Azure... -- detect-secrets only). The filler text still holds what real
text holds: URLs without credentials, hex digests, UUIDs, timestamps, numbers,
the odd e-mail address in a log line (ghost redacts those too, and pays for it).
"""

from __future__ import annotations

import base64
import json
import random
import string
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["KINDS", "Document", "corpus"]

_ALNUM = string.ascii_letters + string.digits
_UPPER_DIGITS = string.ascii_uppercase + string.digits
_LOWER_DIGITS = string.ascii_lowercase + string.digits
_B64 = string.ascii_letters + string.digits + "+/"


@dataclass(frozen=True, slots=True)
class Document:
    """One document of the corpus.

    Attributes:
        kind: ``"prose"``, ``"json"``, ``"log"``, ``"code"``, ``"config"`` or ``"csv"``.
        suffix: the file name suffix a user's file of this kind would have.
        text: the document.
        planted: (secret kind, start, end) of every planted secret, character offsets.
    """

    kind: str
    suffix: str
    text: str
    planted: tuple[tuple[str, int, int], ...]


def _pick(rng: random.Random, alphabet: str, size: int) -> str:
    return "".join(rng.choices(alphabet, k=size))


def _mixed(rng: random.Random, size: int) -> str:
    """Random alphanumerics holding at least one digit, one lower- and one upper-case letter."""
    while True:
        text = _pick(rng, _ALNUM, size)
        if (
            any(c.isdigit() for c in text)
            and any(c.islower() for c in text)
            and any(c.isupper() for c in text)
        ):
            return text


def _b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _aws(rng: random.Random) -> str:
    return rng.choice(("AKIA", "ASIA")) + _pick(rng, _UPPER_DIGITS, 16)


def _github(rng: random.Random) -> str:
    return rng.choice(("ghp_", "gho_", "ghs_")) + _mixed(rng, 36)


def _slack(rng: random.Random) -> str:
    numbers = f"{rng.randrange(10**10, 10**11)}-{rng.randrange(10**11, 10**12)}"
    return f"{rng.choice(('xoxb', 'xoxp'))}-{numbers}-{_pick(rng, _LOWER_DIGITS, 24)}"


def _stripe(rng: random.Random) -> str:
    return rng.choice(("sk_live_", "rk_live_")) + _mixed(rng, 24)


def _openai(rng: random.Random) -> str:
    prefix = rng.choice(("sk-", "sk-proj-"))
    return f"{prefix}{_mixed(rng, 20)}T3BlbkFJ{_mixed(rng, 20)}"


def _pem(rng: random.Random, newline: str) -> str:
    label = rng.choice(("RSA PRIVATE KEY", "EC PRIVATE KEY", "OPENSSH PRIVATE KEY", "PRIVATE KEY"))
    lines = [_pick(rng, _B64, 64) for _ in range(rng.randint(8, 25))]
    lines.append(_pick(rng, _B64, rng.randint(8, 60)) + "==")
    return newline.join([f"-----BEGIN {label}-----", *lines, f"-----END {label}-----"])


def _jwt(rng: random.Random) -> str:
    header = {"alg": rng.choice(("HS256", "RS256")), "typ": "JWT"}
    payload = {
        "sub": str(rng.randrange(10**6, 10**9)),
        "name": _pick(rng, string.ascii_lowercase, 8),
        "iat": rng.randrange(1_600_000_000, 1_800_000_000),
        "scope": rng.choice(("read", "read write", "admin")),
    }
    parts = [json.dumps(header).encode(), json.dumps(payload).encode(), rng.randbytes(32)]
    return ".".join(_b64url(part) for part in parts)


def _url(rng: random.Random) -> tuple[str, str, str]:
    """(before, secret, after): the credentials are the secret, scheme and host context."""
    scheme = rng.choice(("postgres", "mysql", "redis", "mongodb", "amqp", "https"))
    user = rng.choice(("app", "admin", "svc_reader", "deploy", "root"))
    host = rng.choice(("db.internal", "10.0.3.7", "cache.prod.example.net", "mq.example.com"))
    return f"{scheme}://", f"{user}:{_mixed(rng, rng.randint(16, 28))}", f"@{host}:5432/main"


def _bearer(rng: random.Random) -> str:
    return _mixed(rng, rng.randint(32, 48))


# The kinds planted, and how many of every 200 secrets are of each kind.
KINDS: dict[str, int] = {
    "aws_access_key_id": 25,
    "github_token": 25,
    "slack_token": 20,
    "stripe_key": 20,
    "openai_api_key": 20,
    "private_key": 15,
    "jwt": 25,
    "url_credentials": 30,
    "bearer_token": 20,
}

_TOKENS: dict[str, Callable[[random.Random], str]] = {
    "aws_access_key_id": _aws,
    "github_token": _github,
    "slack_token": _slack,
    "stripe_key": _stripe,
    "openai_api_key": _openai,
    "jwt": _jwt,
    "bearer_token": _bearer,
}

_NAMES = {
    "aws_access_key_id": "AWS_ACCESS_KEY_ID",
    "github_token": "GITHUB_TOKEN",
    "slack_token": "SLACK_BOT_TOKEN",
    "stripe_key": "STRIPE_SECRET_KEY",
    "openai_api_key": "OPENAI_API_KEY",
    "jwt": "SESSION_TOKEN",
    "bearer_token": "AUTH_HEADER",
    "url_credentials": "DATABASE_URL",
    "private_key": "TLS_KEY",
}


class _Builder:
    """Text under construction, with the spans of the secrets written into it."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.size = 0
        self.planted: list[tuple[str, int, int]] = []

    def add(self, text: str) -> None:
        self.parts.append(text)
        self.size += len(text)

    def secret(self, kind: str, text: str) -> None:
        self.planted.append((kind, self.size, self.size + len(text)))
        self.add(text)

    def planted_secret(self, kind: str, rng: random.Random, *, newline: str = "\n") -> None:
        """Write a secret of ``kind`` with the context its kind always has."""
        if kind == "url_credentials":
            before, secret, after = _url(rng)
            self.add(before)
            self.secret(kind, secret)
            self.add(after)
        elif kind == "bearer_token":
            self.add("Bearer ")
            self.secret(kind, _bearer(rng))
        elif kind == "private_key":
            self.secret(kind, _pem(rng, newline))
        else:
            self.secret(kind, _TOKENS[kind](rng))


class _Filler:
    """Ordinary text of every kind, from one seeded generator."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        letters = string.ascii_lowercase
        self.words = [
            "".join(rng.choice(letters) for _ in range(rng.randint(2, 10))) for _ in range(4000)
        ]
        self.users = [f"{rng.choice(self.words)}.{rng.choice(self.words)}" for _ in range(40)]

    def word(self) -> str:
        return self.rng.choice(self.words)

    def sentence(self) -> str:
        rng = self.rng
        words = [self.word() for _ in range(rng.randint(6, 18))]
        words[0] = words[0].capitalize()
        if rng.random() < 0.2:
            words.insert(rng.randrange(len(words)), str(rng.randint(1, 99_999)))
        if rng.random() < 0.05:
            words.insert(rng.randrange(len(words)), f"https://docs.example.com/{self.word()}")
        return " ".join(words) + rng.choice(".....?!")

    def hexid(self, size: int = 64) -> str:
        return f"{self.rng.getrandbits(size * 4):0{size}x}"

    def uuid(self) -> str:
        h = self.hexid(32)
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"

    def stamp(self) -> str:
        rng = self.rng
        return (
            f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T"
            f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}Z"
        )


def _prose(b: _Builder, f: _Filler, secrets: list[str], target: int) -> None:
    while b.size < target or secrets:
        b.add(" ".join(f.sentence() for _ in range(f.rng.randint(2, 6))))
        if secrets and f.rng.random() < 0.5:
            kind = secrets.pop()
            b.add(f" The {f.word()} credential is ")
            b.planted_secret(kind, f.rng)
            b.add(" -- rotate it.")
        b.add("\n\n")


def _json(b: _Builder, f: _Filler, secrets: list[str], target: int) -> None:
    rng = f.rng
    b.add("[\n")
    first = True
    while b.size < target or secrets:
        if not first:
            b.add(",\n")
        first = False
        b.add(
            f'  {{"id": {rng.randint(1, 10**9)}, "name": "{f.word()} {f.word()}", '
            f'"ts": "{f.stamp()}", "score": {rng.random():.6f}, '
            f'"sha256": "{f.hexid()}", "url": "https://api.example.com/v1/{f.word()}?page='
            f'{rng.randint(1, 99)}", "note": "{f.sentence()}"'
        )
        if secrets and rng.random() < 0.3:
            kind = secrets.pop()
            b.add(f', "{_NAMES[kind].lower()}": "')
            if kind == "bearer_token":
                b.add("Authorization: ")
            b.planted_secret(kind, rng, newline="\\n")
            b.add('"')
        b.add("}")
    b.add("\n]\n")


def _log(b: _Builder, f: _Filler, secrets: list[str], target: int) -> None:
    rng = f.rng
    while b.size < target or secrets:
        level = rng.choice(("INFO", "INFO", "INFO", "DEBUG", "WARN", "ERROR"))
        b.add(f"{f.stamp()} {level} [{f.word()}.{f.word()}] req={f.uuid()} ")
        roll = rng.random()
        if secrets and roll < 0.15:
            kind = secrets.pop()
            if kind == "bearer_token":
                b.add("outgoing headers: Authorization: ")
            elif kind == "private_key":
                b.add("loaded key material:\n")
            else:
                b.add(f"config {_NAMES[kind]}=")
            b.planted_secret(kind, rng)
        elif roll < 0.17:
            b.add(f"login ok user={rng.choice(f.users)}@example.com ip=10.{rng.randint(0, 255)}.")
            b.add(f"{rng.randint(0, 255)}.{rng.randint(0, 255)}")
        else:
            b.add(f"{f.sentence()} took={rng.randint(1, 5000)}ms status={rng.choice((200, 404))}")
        b.add("\n")


def _code(b: _Builder, f: _Filler, secrets: list[str], target: int) -> None:
    rng = f.rng
    b.add('"""' + f.sentence() + '"""\n\nimport os\nimport json\n\n')
    while b.size < target or secrets:
        name = f"{f.word()}_{f.word()}"
        args = ", ".join(f.word() for _ in range(rng.randint(1, 4)))
        b.add(f"\n\ndef {name}({args}):\n    # {f.sentence()}\n")
        for _ in range(rng.randint(2, 8)):
            b.add(f"    {f.word()} = {f.word()}.{f.word()}({f.word()}, {rng.randint(0, 999)})\n")
        if secrets and rng.random() < 0.3:
            kind = secrets.pop()
            if kind == "private_key":
                b.add('    key = """')
                b.planted_secret(kind, rng)
                b.add('"""\n')
            else:
                b.add(f'    {_NAMES[kind].lower()} = "')
                if kind == "bearer_token":
                    b.add("Authorization: ")
                b.planted_secret(kind, rng)
                b.add('"\n')
        b.add(f"    return {f.word()}\n")


def _config(b: _Builder, f: _Filler, secrets: list[str], target: int) -> None:
    rng = f.rng
    while b.size < target or secrets:
        b.add(f"\n# {f.sentence()}\n[{f.word()}]\n")
        for _ in range(rng.randint(3, 10)):
            value = rng.choice(
                (str(rng.randint(0, 65535)), f.word(), "true", f'"{f.sentence()}"', f.hexid(40))
            )
            b.add(f"{f.word()}_{f.word()} = {value}\n")
        if secrets and rng.random() < 0.5:
            kind = secrets.pop()
            if kind == "private_key":
                b.add(f"{_NAMES[kind]} = ")
                b.planted_secret(kind, rng, newline="\\n")
                b.add("\n")
            else:
                b.add(f'{_NAMES[kind]} = "')
                if kind == "bearer_token":
                    b.add("Authorization: ")
                b.planted_secret(kind, rng)
                b.add('"\n')


def _csv(b: _Builder, f: _Filler, secrets: list[str], target: int) -> None:
    rng = f.rng
    b.add("id,name,created,amount,ratio,digest,comment\n")
    while b.size < target or secrets:
        b.add(
            f"{rng.randint(1, 10**7)},{f.word()},{f.stamp()},{rng.randint(0, 10**6)},"
            f"{rng.random():.8f},{f.hexid(40)},"
        )
        if secrets and rng.random() < 0.02:
            kind = secrets.pop()
            quote = '"' if kind == "private_key" else ""  # a multi-line field is quoted
            b.add(quote)
            b.planted_secret(kind, rng)
            b.add(quote)
        else:
            b.add(f.word())
        b.add("\n")


_KINDS: dict[str, tuple[str, Callable[[_Builder, _Filler, list[str], int], None]]] = {
    "prose": (".txt", _prose),
    "json": (".json", _json),
    "log": (".log", _log),
    "code": (".py", _code),
    "config": (".ini", _config),
    "csv": (".csv", _csv),
}


def corpus(size: int = 10_000_000, secrets: int = 200, seed: int = 5) -> list[Document]:
    """A deterministic mixed corpus of about ``size`` characters (ASCII, so bytes).

    Args:
        size: the total size to reach.
        secrets: how many secrets to plant, in the proportions of `KINDS`.
        seed: the generator's seed; the same arguments give the same corpus.

    Returns:
        Documents of every kind, in a shuffled order, each 2-64 KB.
    """
    rng = random.Random(seed)
    filler = _Filler(rng)
    total = sum(KINDS.values())
    pool = [kind for kind, count in KINDS.items() for _ in range(count * secrets // total)]
    rng.shuffle(pool)
    sizes: list[int] = []
    while sum(sizes) < size:
        sizes.append(rng.randint(2_000, 64_000))
    # Spread the secrets over the documents: each gets its share of the pool.
    shares = [len(pool) * s // sum(sizes) for s in sizes]
    for index in range(len(pool) - sum(shares)):
        shares[index % len(shares)] += 1
    documents: list[Document] = []
    kinds = list(_KINDS)
    for target, share in zip(sizes, shares, strict=True):
        kind = rng.choice(kinds)
        suffix, write = _KINDS[kind]
        mine = [pool.pop() for _ in range(share)]
        builder = _Builder()
        write(builder, filler, mine, target)
        documents.append(Document(kind, suffix, "".join(builder.parts), tuple(builder.planted)))
    return documents
