"""The claims ledger: every quantitative statement about a customer is a claim with value, unit, source, status.

A claim's ``text`` carries its number only through the ``{value}`` placeholder, so the number lives in exactly one
field and a statement cannot smuggle in an extra figure. ``status`` is ``"verified"`` (the figure was read in the
source, and ``checked`` says where and how) or ``"unverified"`` (the source could not be checked). Unverified
claims are **quarantined**: :class:`Ledger` keeps them in a separate list that only the editors' listing
(``capacity claims --unverified``) reads in full; every other output is built from :meth:`Ledger.verified`, and
the archetypes page names the quarantine by id alone (:meth:`Ledger.quarantined_ids`: no statement, value or
source), beside the original study's count (``STUDY_QUARANTINED``).

Loading validates every entry and rejects a bad one with an :class:`InputError` that names it (its id, or its
position when the id itself is missing) and the field at fault.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

from part1_capacity.calculator.base import validate
from part1_capacity.calculator.base.errors import InputError

DATA = Path(__file__).resolve().parent / "data"
DEFAULT_LEDGER = DATA / "claims.toml"

STATUSES = ("verified", "unverified")

# The original study this course is reconciled with says it quarantined this many unsourced claims. It did not
# publish which, so the count is all there is to set beside this ledger's quarantine.
STUDY_QUARANTINED = {"count": 13, "source": "the original study's own account of its claims (its list of them "
                                            "was not published)"}

# unit → how a value is written after it ("{v}" is the number). One table: the renderers and the tests use it.
UNITS = {
    "GB": "{v} GB",
    "TB/s": "{v} TB/s",
    "TFLOP/s": "{v} TFLOP/s",
    "W": "{v} W",
    "percent": "{v}%",
    "billion parameters": "{v} billion parameters",
    "bits per weight": "{v} bits per weight",
    "tokens/s": "{v} tokens/s",
    "ms per prompt token": "{v} ms per prompt token",
    "GPUs": "{v} GPUs",
    "chips": "{v} chips",
    "data centres": "{v} data centres",
    "years": "{v} years",
    "USD per GB": "{v} USD per GB",
    "USD per GPU-hour": "{v} USD per GPU-hour",
}

# A quantity written in prose: a digit that does not continue a name ("HBM3e", "Nano-1", "MI300X" are names).
QUANTITY = re.compile(r"(?<![A-Za-z0-9_.\-])\d")

_REQUIRED = ("id", "text", "value", "unit", "source", "status", "archetypes")
_OPTIONAL = ("url", "as_of", "checked")


def format_number(v) -> str:
    """``250000`` → ``"250,000"``, ``3.25`` → ``"3.25"``, ``192.0`` → ``"192"``."""
    if float(v).is_integer():
        return f"{int(v):,}"
    return f"{v:,.6g}" if abs(v) < 1e6 else f"{v:,.0f}"


def format_value(value, unit: str, tr=None) -> str:
    """A claim's value with its unit, as every output writes it; a range is written ``low–high``. ``tr`` (a
    ``course.shared.i18n.Translator``) writes the unit in another language: the site's Korean edition."""
    if isinstance(value, tuple):
        v = f"{format_number(value[0])}–{format_number(value[1])}"
    else:
        v = format_number(value)
    return tr(UNITS[unit], v=v) if tr else UNITS[unit].format(v=v)


@dataclass(frozen=True)
class Claim:
    id: str
    text: str            # the statement, with "{value}" where the number goes
    value: float | tuple  # a number, or a (low, high) range
    unit: str
    source: str          # what the figure is attributed to (document, talk, filing)
    status: str          # "verified" | "unverified"
    archetypes: tuple    # archetype ids the claim is about
    url: str = ""
    as_of: str = ""      # when the figure held
    checked: str = ""    # verified claims: where the figure was read, and how

    @property
    def verified(self) -> bool:
        return self.status == "verified"

    def statement(self, tr=None) -> str:
        """The claim as a sentence, its value written in (``tr``: in another language, from its catalogue)."""
        if tr:
            return tr(self.text, value=format_value(self.value, self.unit, tr))
        return self.text.replace("{value}", format_value(self.value, self.unit))

    def to_dict(self) -> dict:
        value = list(self.value) if isinstance(self.value, tuple) else self.value
        return {"id": self.id, "statement": self.statement(), "value": value, "unit": self.unit,
                "source": self.source, "url": self.url, "as_of": self.as_of, "status": self.status}


class Ledger:
    """Verified claims and the quarantine, kept in two separate lists."""

    def __init__(self, claims, origin: str = "claims ledger"):
        self.origin = origin
        self._verified = {c.id: c for c in claims if c.verified}
        self._quarantine = {c.id: c for c in claims if not c.verified}

    def verified(self, archetype: str | None = None) -> list[Claim]:
        """Verified claims (about ``archetype`` if given): the only claims any output may show."""
        return [c for c in self._verified.values() if archetype is None or archetype in c.archetypes]

    def quarantined(self) -> list[Claim]:
        """Unverified claims, for the editors' listing only (``capacity claims --unverified``)."""
        return list(self._quarantine.values())

    def quarantined_ids(self, archetype: str | None = None) -> list[str]:
        """The unverified claims' ids (about ``archetype`` if given), in file order: all a learner-facing page may
        say of the quarantine."""
        return [c.id for c in self._quarantine.values() if archetype is None or archetype in c.archetypes]


def _value(raw, where):
    def number(x):
        return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0

    if number(raw):
        return raw
    if isinstance(raw, list) and len(raw) == 2 and all(number(x) for x in raw) and raw[0] < raw[1]:
        return (raw[0], raw[1])
    raise InputError(f"{where}: value must be a positive number or a [low, high] pair with low < high, "
                     f"got {raw!r}")


def parse_claim(entry, where: str, archetype_ids=None) -> Claim:
    """Validate one ledger entry; ``where`` names it in every message."""
    if not isinstance(entry, dict):
        raise InputError(f"{where}: must be a table of fields, got {entry!r}")
    cid = entry.get("id")
    if isinstance(cid, str) and cid.strip():
        where = f"{where} '{cid}'"
    for key in _REQUIRED:
        if key not in entry or (isinstance(entry[key], str) and not entry[key].strip()):
            extra = (" (a claim whose source could not be checked still names what it is attributed to, "
                     "with status 'unverified')") if key == "source" else ""
            raise InputError(f"{where}: {key} is missing{extra}")
    unknown = set(entry) - set(_REQUIRED) - set(_OPTIONAL)
    if unknown:
        raise InputError(f"{where}: unknown field(s) {sorted(unknown)}; allowed: "
                         f"{', '.join(_REQUIRED + _OPTIONAL)}")
    for key in ("id", "text", "unit", "source", "status") + _OPTIONAL:
        if key in entry and not isinstance(entry[key], str):
            raise InputError(f"{where}: {key} must be a string, got {entry[key]!r}")
    if not re.fullmatch(r"[a-z0-9][a-z0-9\-]*", cid):
        raise InputError(f"{where}: id must be lower-case letters, digits and '-', got {cid!r}")
    value = _value(entry["value"], where)
    if entry["unit"] not in UNITS:
        raise InputError(f"{where}: unit {entry['unit']!r} is not known; allowed: {', '.join(UNITS)}")
    if entry["status"] not in STATUSES:
        raise InputError(f"{where}: status {entry['status']!r} is not allowed; allowed: {', '.join(STATUSES)}")
    text = entry["text"]
    if text.count("{value}") != 1:
        raise InputError(f"{where}: text must contain the placeholder {{value}} exactly once")
    if QUANTITY.search(text.replace("{value}", "")):
        raise InputError(f"{where}: text contains a number outside {{value}}; one claim states one figure")
    if entry["status"] == "verified" and not entry.get("checked", "").strip():
        raise InputError(f"{where}: a verified claim must say in 'checked' where the figure was read")
    archetypes = entry["archetypes"]
    if not (isinstance(archetypes, list) and archetypes and all(isinstance(a, str) for a in archetypes)):
        raise InputError(f"{where}: archetypes must be a non-empty list of archetype ids")
    if archetype_ids is not None:
        for a in archetypes:
            if a not in archetype_ids:
                raise InputError(f"{where}: archetype {a!r} is not known; allowed: {', '.join(archetype_ids)}")
    return Claim(id=cid, text=text, value=value, unit=entry["unit"], source=entry["source"].strip(),
                 status=entry["status"], archetypes=tuple(archetypes),
                 **{k: entry.get(k, "").strip() for k in _OPTIONAL})


def parse_ledger(doc: dict, origin: str = "claims ledger", archetype_ids=None) -> Ledger:
    entries = doc.get("claim")
    if not isinstance(entries, list):
        raise InputError(f"{origin}: expected [[claim]] tables")
    claims, seen = [], set()
    for i, entry in enumerate(entries, 1):
        claim = parse_claim(entry, f"{origin}: claim #{i}", archetype_ids)
        if claim.id in seen:
            raise InputError(f"{origin}: claim #{i} '{claim.id}': duplicate id")
        seen.add(claim.id)
        claims.append(claim)
    return Ledger(claims, origin)


def load_ledger(path=None, archetype_ids=None) -> Ledger:
    """Read and validate a ledger file (TOML, ``[[claim]]`` tables); the bundled one by default."""
    path = Path(path) if path else DEFAULT_LEDGER
    doc = validate.load_toml(path, "ledger", max_bytes=4 * validate.MIB)   # regular UTF-8 file, size-capped
    return parse_ledger(doc, f"ledger {path.name}", archetype_ids)
