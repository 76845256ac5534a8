"""The RFC 6962 Merkle tree over a run's records (SPEC §5 "Merkle tree and checkpoints").

The records of a run, in ``seq`` order, are the leaves of one RFC 6962
(Certificate Transparency) Merkle tree:

1. leaf hash = SHA-256(``0x00`` ‖ the record's canonical bytes);
2. interior node = SHA-256(``0x01`` ‖ left ‖ right);
3. a tree of ``n > 1`` leaves splits at ``k``, the largest power of two
   below ``n``: its root is the node over the roots of leaves ``[0, k)`` and
   ``[k, n)``; the root of one leaf is its leaf hash, and the root of the
   empty tree is SHA-256 of nothing.

The prefixes ``0x00`` / ``0x01`` keep a leaf from ever being read as a node
(a second-preimage guard). The writer keeps a `CompactRange` — the roots of
the perfect subtrees that make up ``[0, n)``, at most one per bit of ``n`` —
so appending a record costs one leaf hash and, amortised, one node hash, and a
root costs O(log n), with no second pass over the log. Inclusion proofs (audit
paths) and consistency proofs are built and checked as RFC 6962 §2.1 and
RFC 9162 §2.1.3-2.1.4 define them.

This module is pure: bytes in, bytes out; no I/O, no clock. Hashes are raw
32-byte `bytes`; records carry them as lowercase hex. The ``verify_*``
functions never raise on hostile input: anything that is not exactly a valid
proof — a wrong type, a hash that is not 32 bytes, an index out of range, a
proof one hash too long or too short — is False.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Final

__all__ = [
    "EMPTY_ROOT",
    "HASH_SIZE",
    "CompactRange",
    "consistency_proof",
    "inclusion_proof",
    "leaf_hash",
    "node_hash",
    "tree_root",
    "verify_consistency",
    "verify_inclusion",
]

HASH_SIZE: Final = 32
"""Bytes in every hash of the tree (SHA-256)."""

_LEAF_PREFIX: Final = b"\x00"
_NODE_PREFIX: Final = b"\x01"

EMPTY_ROOT: Final = hashlib.sha256(b"").digest()
"""The root of the empty tree: SHA-256 of the empty string (RFC 6962 §2.1)."""


def leaf_hash(data: bytes) -> bytes:
    """Return the RFC 6962 leaf hash of ``data``: SHA-256(``0x00`` ‖ data)."""
    return hashlib.sha256(_LEAF_PREFIX + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """Return the RFC 6962 interior node over ``left`` and ``right``: SHA-256(``0x01`` ‖ l ‖ r)."""
    return hashlib.sha256(_NODE_PREFIX + left + right).digest()


class CompactRange:
    """The tree over leaves ``[0, size)``, kept as the roots of its perfect subtrees.

    ``size`` in binary says which perfect subtrees make up the range: one of
    2**h leaves for each bit h set, largest (leftmost) first. Appending a leaf
    pushes it and merges equal-height neighbours, as a binary counter carries.
    Not thread-safe: a sink appends under its own lock.
    """

    __slots__ = ("_peaks", "_size")

    def __init__(self) -> None:
        self._peaks: list[bytes] = []
        self._size = 0

    @property
    def size(self) -> int:
        """The number of leaves appended so far."""
        return self._size

    def append(self, leaf: bytes) -> None:
        """Add the next leaf, given its leaf hash (see `leaf_hash`).

        Raises:
            ValueError: ``leaf`` is not a 32-byte hash.
        """
        if len(leaf) != HASH_SIZE:
            raise ValueError(f"a leaf hash is {HASH_SIZE} bytes, not {len(leaf)}")
        self._peaks.append(leaf)
        self._size += 1
        # Every trailing zero bit of the new size is a pair of equal subtrees to merge.
        carry = self._size
        while carry & 1 == 0:
            right = self._peaks.pop()
            self._peaks[-1] = node_hash(self._peaks[-1], right)
            carry >>= 1

    def root(self) -> bytes:
        """Return the RFC 6962 root of the leaves appended so far (`EMPTY_ROOT` if none)."""
        if not self._peaks:
            return EMPTY_ROOT
        # The split point of RFC 6962 is the largest peak: fold from the right.
        root = self._peaks[-1]
        for peak in reversed(self._peaks[:-1]):
            root = node_hash(peak, root)
        return root


def tree_root(leaves: Sequence[bytes]) -> bytes:
    """Return the RFC 6962 root of the tree whose leaf hashes are ``leaves``, in order.

    Raises:
        ValueError: a leaf is not a 32-byte hash.
    """
    tree = CompactRange()
    for leaf in leaves:
        tree.append(leaf)
    return tree.root()


def _root_of(leaves: Sequence[bytes], start: int, end: int) -> bytes:
    tree = CompactRange()
    for index in range(start, end):
        tree.append(leaves[index])
    return tree.root()


def _split(size: int) -> int:
    """The largest power of two strictly below ``size`` (``size`` >= 2)."""
    return 1 << ((size - 1).bit_length() - 1)


def _check_size(leaves: Sequence[bytes], size: int | None) -> int:
    if size is None:
        return len(leaves)
    if size < 0 or size > len(leaves):
        raise ValueError(f"a tree of size {size} needs that many leaves; {len(leaves)} were given")
    return size


def inclusion_proof(leaves: Sequence[bytes], index: int, size: int | None = None) -> list[bytes]:
    """Return the audit path of leaf ``index`` in the tree of the first ``size`` leaves.

    The path lists sibling subtree roots from the leaf up (RFC 6962 §2.1.1,
    ``PATH(m, D[n])``). Building it hashes each of the ``size`` leaves about once.

    Args:
        leaves: the leaf hashes of the run, in ``seq`` order.
        index: the leaf to prove, ``0 <= index < size``.
        size: the tree size the proof is for (default: every leaf given).

    Returns:
        The audit path; empty for a tree of one leaf.

    Raises:
        ValueError: ``index`` or ``size`` is out of range.
    """
    size = _check_size(leaves, size)
    if not 0 <= index < size:
        raise ValueError(f"leaf {index} is not in a tree of {size} leaves")
    path: list[bytes] = []
    start, end = 0, size
    while end - start > 1:
        k = _split(end - start)
        if index - start < k:
            path.append(_root_of(leaves, start + k, end))
            end = start + k
        else:
            path.append(_root_of(leaves, start, start + k))
            start += k
    path.reverse()  # built from the root down; a path runs from the leaf up
    return path


def consistency_proof(
    leaves: Sequence[bytes], old_size: int, size: int | None = None
) -> list[bytes]:
    """Return the proof that the tree of ``old_size`` leaves is a prefix of the tree of ``size``.

    RFC 6962 §2.1.2 (``PROOF(m, D[n])``); empty when the sizes are equal.

    Args:
        leaves: the leaf hashes of the run, in ``seq`` order.
        old_size: the earlier tree size, ``1 <= old_size <= size``.
        size: the later tree size (default: every leaf given).

    Raises:
        ValueError: the sizes are out of range (a proof from the empty tree
            proves nothing, so ``old_size`` 0 is refused).
    """
    size = _check_size(leaves, size)
    if not 1 <= old_size <= size:
        raise ValueError(f"no consistency proof from a tree of {old_size} leaves to one of {size}")
    proof: list[bytes] = []
    start, end, m = 0, size, old_size
    # ``whole``: the old tree is exactly the current subtree, whose root the verifier has.
    whole = True
    while m != end - start:
        k = _split(end - start)
        if m <= k:
            proof.append(_root_of(leaves, start + k, end))
            end = start + k
        else:
            proof.append(_root_of(leaves, start, start + k))
            start += k
            m -= k
            whole = False
    if not whole:
        proof.append(_root_of(leaves, start, end))
    proof.reverse()
    return proof


# Exact types: a subclass could override ``==`` and make a forged root compare equal.
def _is_hash(value: object) -> bool:
    return type(value) is bytes and len(value) == HASH_SIZE


def _is_count(value: object) -> bool:
    return type(value) is int and value >= 0


def _is_path(proof: object) -> bool:
    return type(proof) in (list, tuple)


def verify_inclusion(
    leaf: bytes, index: int, size: int, proof: Sequence[bytes], root: bytes
) -> bool:
    """Check that ``leaf`` is leaf ``index`` of the tree of ``size`` leaves with ``root``.

    RFC 9162 §2.1.3.2, step by step; the proof must have exactly the length
    the index and size call for.

    Args:
        leaf: the leaf hash (see `leaf_hash`), not the record's bytes.
        index: the leaf's position (its record's ``seq``).
        size: the tree size the proof is for.
        proof: the audit path, from the leaf up.
        root: the tree root the proof must arrive at.

    Returns:
        True only for a valid proof; False for anything else.
    """
    if not (_is_hash(leaf) and _is_hash(root) and _is_count(index) and _is_count(size)):
        return False
    if not _is_path(proof) or index >= size:
        return False
    fn, sn = index, size - 1
    node = leaf
    for sibling in proof:
        if not _is_hash(sibling) or sn == 0:
            return False
        if fn & 1 or fn == sn:
            node = node_hash(sibling, node)
            # A right-border node with no right sibling climbs until it is a right child.
            while fn & 1 == 0 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            node = node_hash(node, sibling)
        fn >>= 1
        sn >>= 1
    return sn == 0 and node == root


def verify_consistency(
    old_size: int, size: int, proof: Sequence[bytes], old_root: bytes, root: bytes
) -> bool:
    """Check that the tree of ``old_size`` leaves with ``old_root`` is a prefix of ``root``'s.

    RFC 9162 §2.1.4.2. Equal sizes need an empty proof and equal roots; a
    proof from the empty tree proves nothing and is refused.

    Returns:
        True only for a valid proof; False for anything else.
    """
    if not (_is_hash(old_root) and _is_hash(root) and _is_count(old_size) and _is_count(size)):
        return False
    if not _is_path(proof) or not all(_is_hash(node) for node in proof):
        return False
    if old_size == 0 or old_size > size:
        return False
    if old_size == size:
        return len(proof) == 0 and old_root == root
    if len(proof) == 0:
        return False
    path = list(proof)
    if old_size & (old_size - 1) == 0:
        # The old tree is a perfect subtree: its root is where both computations start.
        path.insert(0, old_root)
    fn, sn = old_size - 1, size - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    old_node = new_node = path[0]
    for node in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            old_node = node_hash(node, old_node)
            new_node = node_hash(node, new_node)
            while fn & 1 == 0 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            new_node = node_hash(new_node, node)
        fn >>= 1
        sn >>= 1
    return sn == 0 and old_node == old_root and new_node == root
