"""The backlogged tenants of a fair scheduler, ordered by (vTime, tenant order), each node augmented with
the least head-of-queue key in its subtree, so the next decision is one O(log n) descent."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cluster.scheduling.tenant_scheduler import TenantAccount


# A treap keyed by (vtime, tenant order), augmented with the minimum head key of each subtree ---


class TreapNode:
    __slots__ = ("key", "prio", "left", "right", "parent", "own", "best", "tenant")

    def __init__(self, key: tuple, val: tuple, tenant: TenantAccount, prio: float) -> None:
        self.key, self.tenant, self.prio = key, tenant, prio
        self.left = self.right = self.parent = None
        self.own: tuple = (val, tenant.order)  # this node's (head key, order)
        self.best: tuple = self.own  # the least `own` in its subtree


def _pull(n: TreapNode) -> None:
    b = n.own
    c = n.left
    if c is not None and c.best < b:
        b = c.best
    c = n.right
    if c is not None and c.best < b:
        b = c.best
    n.best = b


class Treap:
    """Nodes with parent pointers, so an update touches one root-to-node path: insertion descends to
    a leaf and rotates up (expected O(1) rotations), removal rotates down to a leaf and cuts it, and
    the ancestors' subtree minima are re-pulled only until one stays the same. `visits` counts the
    nodes walked, for tests of the O(log n) bound."""

    def __init__(self, seed: int = 0) -> None:
        self.root: TreapNode | None = None
        self._rng = random.Random(seed)
        self.size = 0
        self.visits = 0

    def insert(self, key: tuple, val: tuple, tenant: TenantAccount) -> TreapNode:
        node = TreapNode(key, val, tenant, self._rng.random())
        self._link(node)
        return node

    def remove(self, key: tuple) -> None:
        n = self.root
        while n is not None and n.key != key:
            n = n.left if key < n.key else n.right
        if n is None:
            raise KeyError(key)
        self.unlink(n)

    def rekey(self, node: TreapNode, key: tuple) -> None:
        """Move a linked node to a new key (its tenant's vTime changed)."""
        self.unlink(node)
        node.key = key
        self._link(node)

    def set_val(self, node: TreapNode, val: tuple) -> None:
        """Change a linked node's head key in place (its key, hence its place, is unchanged)."""
        node.own = (val, node.tenant.order)
        self._repull(node, None)

    def _rotate_up(self, x: TreapNode) -> None:
        """Swap `x` with its parent; the old parent's minimum is re-pulled, `x`'s is left to the caller."""
        p = x.parent
        g = p.parent
        if p.left is x:
            c = x.right
            p.left, x.right = c, p
        else:
            c = x.left
            p.right, x.left = c, p
        if c is not None:
            c.parent = p
        p.parent, x.parent = x, g
        if g is None:
            self.root = x
        elif g.left is p:
            g.left = x
        else:
            g.right = x
        _pull(p)

    def _repull(self, n: TreapNode | None, top: TreapNode | None) -> None:
        """Re-pull from `n` up: every node below `top` (rotated ones), then from `top` on only until a
        node's minimum is the same object as before (then nothing above it changes either)."""
        steps = 0
        while n is not None and n is not top:
            _pull(n)
            n = n.parent
            steps += 1
        while n is not None:
            old = n.best
            _pull(n)
            steps += 1
            if n.best is old:
                break
            n = n.parent
        self.visits += steps

    def _link(self, node: TreapNode) -> None:
        node.left = node.right = node.parent = None
        node.best = node.own
        self.size += 1
        p = self.root
        if p is None:
            self.root = node
            return
        key, steps = node.key, 0
        while True:
            steps += 1
            if key < p.key:
                if p.left is None:
                    p.left = node
                    break
                p = p.left
            else:
                if p.right is None:
                    p.right = node
                    break
                p = p.right
        self.visits += steps
        node.parent = p
        prio, rotated = node.prio, False
        while node.parent is not None and node.parent.prio < prio:
            self._rotate_up(node)
            rotated = True
        if rotated:
            _pull(node)
        self._repull(node.parent, None)

    def unlink(self, node: TreapNode) -> None:
        top = node.parent
        while node.left is not None and node.right is not None:
            self._rotate_up(node.left if node.left.prio > node.right.prio else node.right)
        child = node.left if node.left is not None else node.right
        p = node.parent
        if child is not None:
            child.parent = p
        if p is None:
            self.root = child
        elif p.left is node:
            p.left = child
        else:
            p.right = child
        node.parent = node.left = node.right = None
        self.size -= 1
        self._repull(p, top)

    def first(self) -> TreapNode | None:
        n = self.root
        while n is not None and n.left is not None:
            n = n.left
        return n

    def best_below(self, limit: float) -> tuple | None:
        """The smallest (val, order) among nodes whose vtime <= limit: one descent, every node whose
        vtime qualifies brings its left subtree's minimum along."""
        best, n, steps = None, self.root, 0
        while n is not None:
            steps += 1
            if n.key[0] <= limit:
                b = n.own
                c = n.left
                if c is not None and c.best < b:
                    b = c.best
                if best is None or b < best:
                    best = b
                n = n.right
            else:
                n = n.left
        self.visits += steps
        return best

    def depth(self) -> int:
        def d(n: TreapNode | None) -> int:
            return 0 if n is None else 1 + max(d(n.left), d(n.right))

        return d(self.root)
