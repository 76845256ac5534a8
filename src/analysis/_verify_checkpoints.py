"""Checkpoints, signatures and anchors: what the hash chain alone cannot show (ADR 0013).

The hash chain shows that a log is self-consistent. It cannot show who wrote
it (anyone can edit a record and re-chain every record after it), nor that
no tail was cut (a cut looks exactly like a crash). SPEC §5 closes both
gaps with ``/checkpoints`` records — RFC 6962 Merkle roots over the records
in C2SP signed-note form, signed with Ed25519 when the run has a key — and
with anchors, checkpoint notes the auditor holds from outside the file.

`CheckpointCheck` is one `RecordCheck`. It feeds every record it visits,
in file order, into a compact range (leaf = SHA-256(0x00 ‖ its canonical
bytes, `RecordFacts.canonical`); O(log n) per record, no second pass), and its rules are:

1. **Schedule.** The record right after ``/run`` is a checkpoint, and the
   record right before the seal is one: the final checkpoint covers every
   record before the seal.
2. **Tree head.** A checkpoint at file position p has ``tree_size`` = its
   ``seq`` = p, ``root_hash`` = the root of the records before it, and
   ``head_sha256`` = the content address of the record just before it.
3. **Note.** The note parses (C2SP signed-note, tlog-checkpoint) and states
   what the record's fields imply: origin ``ghost.run/<run_id>``,
   ``tree_size``, ``root_hash``. The parser accepts only the one spelling
   ghost writes (no extension line, canonical base64, no leading zero), so
   equal fields make the note byte-exact to the one the fields make. It is signed
   exactly once, by the key and name ``/run`` declares, when it declares
   one, and not at all when it does not.
4. **Signature.** With ``public_key`` (the auditor's key), every note must
   carry a valid signature by it; a run that declares no key, or another
   key, is a problem. Without it, the signature is checked against the key
   the run declares — which proves consistency, not authorship (anyone can
   re-sign a forged log with a key of their own and declare it).
5. **Anchors.** Each anchor names this run (its origin), and the file's
   tree at the anchor's size has the anchor's root (the roots at those
   sizes are taken during the same pass: the sizes are known before it). An
   anchor larger than the file holds shows a cut tail; a root that differs,
   a rewritten past. With ``public_key``, a signed anchor's signatures must
   verify against it.

Anchor problems are about the run, not a record; all others name the
checkpoint (or ``/run``, or seal) record concerned. Messages quote only
numbers, hashes and key ids the check computed or validated.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Mapping, Sequence
from enum import Enum, auto
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from analysis._run_facts import (
    CHECKPOINTS_TOPIC,
    RUN_TOPIC,
    SEAL_TOPIC,
    RecordFacts,
    RunEnd,
    is_uuid,
    shown,
)
from analysis._verify_model import IntegrityCheck, RunProblem, SignatureCheck

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from audit import CheckpointNote, CompactRange, Note, NoteVerifier

__all__ = ["CheckpointCheck"]

_SHA256_HEX_DIGITS: Final = 64


class _DeclaredKey(NamedTuple):
    """The key ``/run`` declares: its verifier (None if unusable) and its computed key id."""

    verifier: NoteVerifier | None
    key_id: str | None


_NO_KEY: Final = _DeclaredKey(None, None)


class _KeyUse(Enum):
    GIVEN = auto()
    DECLARED = auto()
    NONE = auto()


class CheckpointCheck:
    """Checkpoint roots, heads, notes, signatures and anchors (see the module docstring).

    Args:
        public_key: the key the auditor holds, or None.
        anchors: checkpoint notes the auditor holds, parsed.
    """

    __slots__ = (
        "_anchor_roots",
        "_anchor_sizes",
        "_anchors",
        "_checkpoints",
        "_declared",
        "_given_id",
        "_last",
        "_matched",
        "_public_key",
        "_run_id",
        "_run_signed",
        "_tree",
    )

    def __init__(
        self, public_key: Ed25519PublicKey | None, anchors: Sequence[CheckpointNote]
    ) -> None:
        from audit import CompactRange, key_id

        self._public_key = public_key
        self._given_id = None if public_key is None else key_id(public_key)
        self._anchors = tuple(anchors)
        self._tree: CompactRange = CompactRange()
        # The root of the file's tree at each anchored size, taken as the pass goes by.
        self._anchor_sizes = frozenset(anchor.checkpoint.tree_size for anchor in self._anchors)
        self._anchor_roots: dict[int, bytes] = {}
        self._take_root()
        self._checkpoints = 0
        self._matched = 0
        self._run_id: str | None = None
        self._run_signed = False
        self._declared = _NO_KEY  # what /run declares, once it is read
        self._last: RecordFacts | None = None

    @property
    def checkpoint_count(self) -> int:
        """The checkpoint records visited."""
        return self._checkpoints

    @property
    def anchors_matched(self) -> int:
        """The anchors found to match the file's tree (known once `finish` has run)."""
        return self._matched

    @property
    def signatures(self) -> SignatureCheck:
        """Against which key the notes' signatures were checked."""
        if self._public_key is not None:
            return SignatureCheck.GIVEN_KEY
        if self._run_signed:
            return SignatureCheck.DECLARED_KEY
        return SignatureCheck.UNSIGNED

    def visit(self, facts: RecordFacts) -> Iterable[RunProblem]:
        problems: list[RunProblem] = []
        if facts.position == 0 and facts.topic == RUN_TOPIC:
            problems.extend(self._run(facts))
        elif facts.position == 1 and facts.topic != CHECKPOINTS_TOPIC:
            problems.append(
                facts.problem(
                    IntegrityCheck.CHECKPOINT,
                    "the record after /run is not a checkpoint, but a ghost sink writes one"
                    " right after /run: it was removed or records were inserted",
                )
            )
        if facts.topic == CHECKPOINTS_TOPIC:
            self._checkpoints += 1
            problems.extend(self._checkpoint(facts))
        elif facts.topic == SEAL_TOPIC and (
            self._last is None or self._last.topic != CHECKPOINTS_TOPIC
        ):
            problems.append(
                facts.problem(
                    IntegrityCheck.CHECKPOINT,
                    "the record before the seal is not a checkpoint, but a ghost sink always"
                    " writes a final checkpoint covering every record before the seal",
                )
            )
        self._append(facts)
        return problems

    def finish(self, end: RunEnd) -> Iterable[RunProblem]:
        problems: list[RunProblem] = []
        count = len(self._anchors)
        for number, anchor in enumerate(self._anchors, start=1):
            why = self._anchor_problem(anchor, end.record_count)
            if why is None:
                self._matched += 1
            else:
                problems.append(
                    RunProblem(IntegrityCheck.ANCHOR, f"anchor {number} of {count}: {why}")
                )
        return problems

    # -- the /run record -----------------------------------------------------------------

    def _run(self, facts: RecordFacts) -> list[RunProblem]:
        run_id = facts.field("run_id")
        self._run_id = run_id if is_uuid(run_id) else None
        signing = facts.field("signing")
        problems: list[RunProblem] = []
        if isinstance(signing, Mapping):
            self._run_signed = True
            self._declared = _declared_key(signing)
            if self._declared.verifier is None:
                problems.append(
                    facts.problem(
                        IntegrityCheck.CHECKPOINT,
                        "its signing key cannot be used: the public key is not 32 bytes of"
                        " standard base64, its key_id is not that key's SHA-256, or its key"
                        " name is not a valid note key name",
                    )
                )
        if self._given_id is None:
            return problems
        if not self._run_signed:
            problems.append(
                facts.problem(
                    IntegrityCheck.CHECKPOINT,
                    f"a public key was given (key id {self._given_id}), but the run declares"
                    " no signing key: its checkpoints are unsigned, so nothing shows the"
                    " key holder wrote it",
                )
            )
        elif self._declared.key_id != self._given_id:
            declared = self._declared.key_id
            named = "an unusable key" if declared is None else f"key {declared}"
            problems.append(
                facts.problem(
                    IntegrityCheck.CHECKPOINT,
                    f"the run declares signing {named}, not the key given ({self._given_id})",
                )
            )
        return problems

    # -- a /checkpoints record -----------------------------------------------------------

    def _checkpoint(self, facts: RecordFacts) -> list[RunProblem]:
        problems: list[str] = []
        covered = facts.position  # the records before it, which ghost's checkpoints cover
        tree_size = facts.integer("tree_size")
        if tree_size is not None and facts.seq is not None and tree_size != facts.seq:
            problems.append(
                f"its tree_size is {shown(tree_size)}, but its seq is {facts.seq}: a ghost"
                " checkpoint covers every record before it"
            )
        if tree_size is not None and tree_size != covered:
            problems.append(
                f"its tree_size is {shown(tree_size)}, but {covered} record"
                f"{'' if covered == 1 else 's'} precede it in the file"
            )
        root_hash = _hex_hash(facts.field("root_hash"))
        if root_hash is not None and tree_size == covered and root_hash != self._tree.root():
            problems.append(
                f"its root_hash is {root_hash.hex()}, but the RFC 6962 root of the {covered}"
                f" records before it is {self._tree.root().hex()}: a record it covers was"
                " altered, removed, inserted or reordered"
            )
        head = facts.field("head_sha256")
        previous = self._last
        if previous is not None and tree_size == covered and head != previous.address:
            problems.append(
                f"its head_sha256 is {shown(head)}, but the record before it,"
                f" {previous.label}, has content address {previous.address}"
            )
        note = facts.field("note")
        if isinstance(note, str) and tree_size is not None and root_hash is not None:
            problems.extend(self._note(note, tree_size, root_hash))
        return [facts.problem(IntegrityCheck.CHECKPOINT, why) for why in problems]

    def _note(self, text: str, tree_size: int, root_hash: bytes) -> list[str]:
        from audit import NoteError, checkpoint_origin, parse_checkpoint_note

        try:
            parsed = parse_checkpoint_note(text)
        except NoteError as exc:
            return [f"its note is not a checkpoint note: {exc.problem}"]
        problems: list[str] = []
        found = parsed.checkpoint
        if self._run_id is not None and found.origin != checkpoint_origin(self._run_id):
            problems.append(
                f"its note's origin is not ghost.run/{self._run_id}: the note is another run's"
            )
        if found.tree_size != tree_size:
            problems.append(
                f"its note states tree size {found.tree_size}, but its tree_size is {tree_size}"
            )
        if found.root_hash != root_hash:
            problems.append(
                f"its note states root {found.root_hash.hex()}, but its root_hash is"
                f" {root_hash.hex()}"
            )
        problems.extend(self._signature(parsed.note))
        return problems

    def _signature(self, note: Note) -> list[str]:
        from audit import NoteError, verify_note

        signatures = note.signatures
        if not self._run_signed:
            if signatures:
                why = (
                    f"its note carries {len(signatures)} signature line(s), but the run declares"
                    " no signing key, and a ghost sink without one signs nothing"
                )
                return [why]
            return []  # a given key and an unsigned run: named once, at /run
        problems: list[str] = []
        declared = self._declared.verifier
        lines = [(signature.name, signature.key_hash) for signature in signatures]
        if declared is not None and lines != [(declared.name, declared.key_hash)]:
            problems.append(
                f"its note carries {len(signatures)} signature line(s), but a ghost sink"
                " signs each note exactly once, with the key and name /run declares"
            )
        use, verifiers = self._verifiers(note)
        if use is _KeyUse.NONE:
            return problems
        try:
            verify_note(note, verifiers)
        except NoteError as exc:
            key = "the public key given" if use is _KeyUse.GIVEN else "the key the run declares"
            problems.append(f"its note's signature does not verify against {key}: {exc.problem}")
        return problems

    def _verifiers(self, note: Note) -> tuple[_KeyUse, list[NoteVerifier]]:

        if self._public_key is not None:
            return _KeyUse.GIVEN, _verifiers_of(self._public_key, note)
        declared = self._declared.verifier
        if declared is None:
            return _KeyUse.NONE, []
        return _KeyUse.DECLARED, [declared]

    # -- the tree ------------------------------------------------------------------------

    def _append(self, facts: RecordFacts) -> None:
        from audit import leaf_hash

        self._tree.append(leaf_hash(facts.canonical))
        self._take_root()
        self._last = facts

    def _take_root(self) -> None:
        size = self._tree.size
        if size in self._anchor_sizes:
            self._anchor_roots[size] = self._tree.root()

    # -- anchors -------------------------------------------------------------------------

    def _anchor_problem(self, anchor: CheckpointNote, record_count: int) -> str | None:
        from audit import NoteError, checkpoint_origin, verify_note

        found = anchor.checkpoint
        size = found.tree_size
        if self._run_id is None:
            return (
                f"it is for tree size {size}, but the run has no readable run id to match its"
                " origin against"
            )
        if found.origin != checkpoint_origin(self._run_id):
            return f"it is not a checkpoint of this run: its origin is not ghost.run/{self._run_id}"
        if size > record_count:
            return (
                f"it is for tree size {size}, but the file holds only {record_count} record"
                f"{'' if record_count == 1 else 's'}: records that were written have been cut"
                " off (a crash never removes what a checkpoint note has seen)"
            )
        root = self._anchor_roots[size]  # taken when the pass went by that size
        if root != found.root_hash:
            return (
                f"it gives root {found.root_hash.hex()} for tree size {size}, but the file's"
                f" records seq 0-{size - 1} have root {root.hex()}: the past was rewritten"
            )
        if self._public_key is not None and anchor.note.signatures:
            try:
                verify_note(anchor.note, _verifiers_of(self._public_key, anchor.note))
            except NoteError as exc:
                return f"its signature does not verify against the public key given: {exc.problem}"
        return None


def _verifiers_of(key: Ed25519PublicKey, note: Note) -> list[NoteVerifier]:
    """The auditor's key under its default name and every name ``note``'s lines use.

    The key hash then picks the lines that claim to be signed by it: a run may
    sign under a name of its own choosing (``McapAuditSink(key_name=...)``).
    """
    from audit import NoteVerifier

    names = sorted({signature.name for signature in note.signatures})
    return [NoteVerifier.for_key(key), *(NoteVerifier.for_key(key, name) for name in names)]


def _hex_hash(value: object) -> bytes | None:
    if not isinstance(value, str) or len(value) != _SHA256_HEX_DIGITS:
        return None
    if value != value.lower():
        return None
    try:
        return bytes.fromhex(value)
    except ValueError:
        return None


def _declared_key(signing: Mapping[str, Any]) -> _DeclaredKey:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from audit import NoteVerifier, key_id

    encoded = signing.get("public_key")
    name = signing.get("key_name")
    if not isinstance(encoded, str) or not isinstance(name, str):
        return _DeclaredKey(None, None)
    try:
        raw = base64.b64decode(encoded.encode("ascii"), validate=True)
        key = Ed25519PublicKey.from_public_bytes(raw)
        verifier = NoteVerifier.for_key(key, name)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        return _DeclaredKey(None, None)
    identity = key_id(key)
    if signing.get("key_id") != identity:
        return _DeclaredKey(None, identity)
    return _DeclaredKey(verifier, identity)
