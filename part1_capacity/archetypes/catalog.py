"""The five archetypes as data (``data/archetypes.toml``), validated on load.

Structure, not personality: who signs off, what they are measured on, what they cannot give up, the decision
cycle, the objections they raise, why suppliers miss them, and a typical workload as calculator inputs. Prose holds
no figures (a number in prose is rejected: it belongs in the claims ledger). Whether an archetype has quantitative
evidence is not a flag someone sets: it is whether the ledger holds at least one *verified* claim about it.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path

from part1_capacity.archetypes.ledger import DATA, QUANTITY, Ledger, load_ledger
from part1_capacity.calculator.base import validate
from part1_capacity.calculator.base.errors import InputError

DEFAULT_ARCHETYPES = DATA / "archetypes.toml"
WHEN = ("any", "kv_cache", "weights")
_PROSE = ("name", "signs_off", "decision_cycle", "why_suppliers_miss")
_LISTS = ("measured_on", "cannot_give_up")
_INPUTS = ("model", "accelerator", "context", "concurrency", "weights_dtype", "kv_dtype")


@dataclass(frozen=True)
class ArchetypeWorkload:
    """An archetype's scenario as calculator inputs (ids from part1_capacity/calculator/data/); sizes in tokens and sequences.
    Not the calculator's ``plan.Workload``: ``concurrency`` becomes its ``batch`` when the scenario is planned
    (``propose.py``); the archetypes file and the JSON keep the word ``concurrency``."""
    description: str
    model: str
    accelerator: str
    context: int         # tokens per sequence (prompt + output)
    concurrency: int     # sequences served at once
    weights_dtype: str
    kv_dtype: str

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in ("description",) + _INPUTS}


@dataclass(frozen=True)
class Objection:
    when: str            # "any" | "kv_cache" | "weights"
    text: str


@dataclass(frozen=True)
class Archetype:
    id: str
    name: str
    signs_off: str
    measured_on: tuple
    cannot_give_up: tuple
    decision_cycle: str
    why_suppliers_miss: str
    objections: tuple
    workload_description: str
    workload: ArchetypeWorkload | None   # None: no calculator inputs (no quantitative evidence)
    evidence: bool              # at least one verified claim in the ledger

    def objections_for(self, bottleneck: str | None) -> list[str]:
        """Objections to expect for a proposal addressing ``bottleneck`` (None: the general ones only)."""
        return [o.text for o in self.objections if o.when == "any" or o.when == bottleneck]

    def structure(self) -> dict:
        """The organisational facts, in words (no figures)."""
        return {"id": self.id, "name": self.name, "signs_off": self.signs_off,
                "measured_on": list(self.measured_on), "cannot_give_up": list(self.cannot_give_up),
                "decision_cycle": self.decision_cycle, "why_suppliers_miss": self.why_suppliers_miss,
                "quantitative_evidence": self.evidence}


def _prose(value, where):
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"{where}: must be a non-empty string")
    if QUANTITY.search(value):
        raise InputError(f"{where}: contains a number; quantitative statements belong in the claims ledger")
    return value.strip()


def _workload(raw, where, evidence):
    if not isinstance(raw, dict):
        raise InputError(f"{where}: workload table is missing (a description at least)")
    description = _prose(raw.get("description"), f"{where}.description")
    inputs = {k: raw[k] for k in _INPUTS if k in raw}
    unknown = set(raw) - set(_INPUTS) - {"description"}
    if unknown:
        raise InputError(f"{where}: unknown field(s) {sorted(unknown)}; allowed: description, {', '.join(_INPUTS)}")
    if not inputs:
        return description, None
    if not evidence:
        raise InputError(f"{where}: this archetype has no verified claim, so its workload may not carry "
                         f"calculator inputs (numbers); keep only the description")
    missing = [k for k in _INPUTS if k not in inputs]
    if missing:
        raise InputError(f"{where}: missing calculator input(s): {', '.join(missing)}")
    for k in ("context", "concurrency"):
        v = inputs[k]
        if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
            raise InputError(f"{where}.{k}: must be a positive whole number, got {v!r}")
    for k in ("model", "accelerator", "weights_dtype", "kv_dtype"):
        if not isinstance(inputs[k], str) or not inputs[k].strip():
            raise InputError(f"{where}.{k}: must be a non-empty id, got {inputs[k]!r}")
    return description, ArchetypeWorkload(description=description, **inputs)


def parse_archetypes(doc: dict, ledger: Ledger, origin: str = "archetypes") -> dict[str, Archetype]:
    entries = doc.get("archetype")
    if not isinstance(entries, list) or not entries:
        raise InputError(f"{origin}: expected [[archetype]] tables")
    out = {}
    for i, raw in enumerate(entries, 1):
        aid = raw.get("id") if isinstance(raw, dict) else None
        if not isinstance(aid, str) or not aid.strip():
            raise InputError(f"{origin}: archetype #{i}: id is missing")
        where = f"{origin}: archetype '{aid}'"
        if aid in out:
            raise InputError(f"{where}: duplicate id")
        prose = {k: _prose(raw.get(k), f"{where}.{k}") for k in _PROSE}
        lists = {}
        for k in _LISTS:
            items = raw.get(k)
            if not isinstance(items, list) or not items:
                raise InputError(f"{where}.{k}: must be a non-empty list of phrases")
            lists[k] = tuple(_prose(x, f"{where}.{k}[{j}]") for j, x in enumerate(items))
        objections = []
        for j, o in enumerate(raw.get("objection") or []):
            if not isinstance(o, dict) or o.get("when") not in WHEN:
                raise InputError(f"{where}.objection[{j}].when: must be one of {', '.join(WHEN)}")
            objections.append(Objection(o["when"], _prose(o.get("text"), f"{where}.objection[{j}].text")))
        if not objections:
            raise InputError(f"{where}: list at least one objection")
        evidence = bool(ledger.verified(aid))
        description, workload = _workload(raw.get("workload"), f"{where}.workload", evidence)
        out[aid] = Archetype(id=aid, objections=tuple(objections), workload_description=description,
                             workload=workload, evidence=evidence, **prose, **lists)
    for claim in ledger.verified() + ledger.quarantined():
        for a in claim.archetypes:
            if a not in out:
                raise InputError(f"{ledger.origin}: claim '{claim.id}': archetype {a!r} is not known; "
                                 f"allowed: {', '.join(out)}")
    return out


def load_archetypes(path=None, ledger: Ledger | None = None) -> dict[str, Archetype]:
    """The archetypes by id, checked against the ledger (the bundled files by default)."""
    path = Path(path) if path else DEFAULT_ARCHETYPES
    ledger = ledger if ledger is not None else load_ledger()
    doc = validate.load_toml(path, "archetypes", max_bytes=4 * validate.MIB)   # regular UTF-8 file, size-capped
    return parse_archetypes(doc, ledger, f"archetypes {path.name}")


def get_archetype(name: str, archetypes: dict[str, Archetype]) -> Archetype:
    """Case-insensitive lookup; an unknown name lists the allowed ones."""
    key = str(name).strip().lower()
    if key not in archetypes:
        near = difflib.get_close_matches(key, list(archetypes), n=1, cutoff=0.5)
        hint = f" (did you mean '{near[0]}'?)" if near else ""
        raise InputError(f"archetype: unknown '{name}'{hint}; "
                         f"allowed: {', '.join(archetypes)}")
    return archetypes[key]
