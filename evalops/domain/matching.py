"""Maximum bipartite matching without recursion, in memory proportional to the edges.

Trajectories hold up to 10,000 expected and 10,000 observed calls. A recursive augmenting
path search overflows Python's stack long before that, and an adjacency matrix of
expected x observed calls does not fit in memory, so the matching is a maximum flow
(Dinic's algorithm, iterative) over a graph that holds one edge per matching pair. Calls
that are interchangeable (the same tool and the same arguments) are grouped into one node
with a capacity, so that a thousand identical calls cost one node, not a million edges.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence


class FlowGraph:
    """A directed graph with integer capacities; edge `e` and `e ^ 1` are each other's
    reverse (the residual edge)."""

    def __init__(self, nodes: int) -> None:
        self.head = [-1] * nodes
        self.to: list[int] = []
        self.cap: list[int] = []
        self.next: list[int] = []

    def add(self, source: int, target: int, capacity: int) -> int:
        """Add an edge; returns its id (its flow is the reverse edge's capacity)."""
        for a, b, c in ((source, target, capacity), (target, source, 0)):
            self.to.append(b)
            self.cap.append(c)
            self.next.append(self.head[a])
            self.head[a] = len(self.to) - 1
        return len(self.to) - 2

    def flow(self, edge: int) -> int:
        return self.cap[edge ^ 1]

    def _levels(self, source: int, sink: int) -> list[int] | None:
        level = [-1] * len(self.head)
        level[source] = 0
        queue = deque([source])
        while queue:
            node = queue.popleft()
            edge = self.head[node]
            while edge != -1:
                if self.cap[edge] > 0 and level[self.to[edge]] < 0:
                    level[self.to[edge]] = level[node] + 1
                    queue.append(self.to[edge])
                edge = self.next[edge]
        return level if level[sink] >= 0 else None

    def _augment(self, source: int, sink: int, level: list[int], arc: list[int]) -> int:
        """Push flow along one shortest augmenting path (an explicit stack, no recursion);
        0 when the level graph is exhausted."""
        path: list[int] = []
        node = source
        while node != sink:
            edge = arc[node]
            while edge != -1 and not (
                self.cap[edge] > 0 and level[self.to[edge]] == level[node] + 1
            ):
                edge = self.next[edge]
            arc[node] = edge
            if edge != -1:
                path.append(edge)
                node = self.to[edge]
                continue
            if node == source:
                return 0
            level[node] = -1  # a dead end for the rest of this phase
            back = path.pop()
            node = self.to[back ^ 1]
            arc[node] = self.next[arc[node]]
        pushed = min(self.cap[e] for e in path)
        for edge in path:
            self.cap[edge] -= pushed
            self.cap[edge ^ 1] += pushed
        return pushed

    def max_flow(self, source: int, sink: int) -> int:
        total = 0
        while (level := self._levels(source, sink)) is not None:
            arc = list(self.head)
            while pushed := self._augment(source, sink, level, arc):
                total += pushed
        return total


def grouped_matching(
    left_sizes: Sequence[int], right_sizes: Sequence[int], pairs: Sequence[tuple[int, int]]
) -> list[int]:
    """How many members of each left group are matched, in a maximum matching where a
    member of left group `i` may take any one member of right group `j` for `(i, j)` in
    `pairs`, and every member is used at most once."""
    left, right = len(left_sizes), len(right_sizes)
    source, sink = left + right, left + right + 1
    graph = FlowGraph(left + right + 2)
    into_left = [graph.add(source, i, size) for i, size in enumerate(left_sizes)]
    for j, size in enumerate(right_sizes):
        graph.add(left + j, sink, size)
    for i, j in pairs:
        graph.add(i, left + j, left_sizes[i])
    graph.max_flow(source, sink)
    return [graph.flow(edge) for edge in into_left]


def maximum_matching(adjacency: Sequence[Sequence[int]], right_size: int) -> list[int | None]:
    """A maximum bipartite matching of single vertices; returns left -> right (or None)."""
    left = len(adjacency)
    source, sink = left + right_size, left + right_size + 1
    graph = FlowGraph(left + right_size + 2)
    for i in range(left):
        graph.add(source, i, 1)
    for j in range(right_size):
        graph.add(left + j, sink, 1)
    edges = [(i, j, graph.add(i, left + j, 1)) for i, row in enumerate(adjacency) for j in row]
    graph.max_flow(source, sink)
    match: list[int | None] = [None] * left
    for i, j, edge in edges:
        if graph.flow(edge):
            match[i] = j
    return match
