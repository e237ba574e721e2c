"""The base of a Dataset chain's steps: a small frozen record that compiles itself.

A chain is a tuple of nodes; the first is a source (``Source``, ``Mix``, ``Interleave``).
Each node knows the step of the chain it was written at (``at``), which stays fixed through
optimisation: random operations are seeded from it, and the state's fingerprint is computed
from the chain as written. A node adds itself to the stage being compiled (``compile``), and,
when it is written after a step that runs after the engine (pack, a batch of a filtered
stream's batches), to that step (``after_engine``). Adding a Dataset operation is one node
class in its own module of this package, exported by ``thresher.dataset.nodes``, and the
``Dataset`` method that appends it.

Example:
    >>> from thresher.dataset.nodes import Map, describe_chain
    >>> describe_chain((Map(at=1, fns=(abs,)),))
    ['map(abs)']
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from thresher.dataset.stage import AfterEngine, CompileContext, Stage
from thresher.errors import ConfigError
from thresher.transforms.operations import describe

__all__ = ["Node", "SourceNode", "describe_chain", "fn_name"]


def fn_name(fn: Any) -> str:
    """``abs``, ``decode``, ``<lambda>``: what ``Map(...)`` shows for a function."""
    text = describe(fn)
    return text[4:-1] if text.startswith("Map(") else text


@dataclass(frozen=True)
class Node:
    """One step of a chain, written at step ``at``."""

    at: int
    #: A step that says where or how the stream runs (shards, workers), not what it holds: it is
    #: left out of the fingerprint, and it may come after pack or a batch of batches.
    places: ClassVar[bool] = False

    def describe(self) -> str:
        raise NotImplementedError

    def identity(self) -> str:
        """What this step contributes to the fingerprint (``describe()`` unless noted)."""
        return self.describe()

    @property
    def where(self) -> str:
        """How errors name this step: ``"batch(4, ...) at step 3"``."""
        return f"{self.describe()} at step {self.at}"

    def compile(self, stage: Stage, ctx: CompileContext) -> Stage:
        """Adds this step to ``stage`` (or closes it and starts the next); returns the current stage."""
        raise ConfigError(f"{self.where}: not supported here")

    def after_engine(self, front: AfterEngine) -> None:
        """Adds this step to what runs after the engine (after pack, or a batch of batches)."""
        raise front.refuse(self.where)

    def fused_into(self, prev: Node) -> tuple[Node, str] | None:
        """``prev`` and this step as one step (the optimiser's fusion), and the note saying so; None
        when they do not fuse."""
        return None

    def noop(self, nodes: Sequence[Node], i: int) -> str | None:
        """Why this step (``nodes[i]``) changes nothing and can be removed, or None."""
        return None


@dataclass(frozen=True)
class SourceNode(Node):
    """The first step of a chain: where its elements come from."""

    def start(self, ctx: CompileContext) -> Stage:
        """The first stage of the chain."""
        raise NotImplementedError


def describe_chain(nodes: Sequence[Node], *, for_fingerprint: bool = False) -> list[str]:
    """One line per node; with ``for_fingerprint``, only what defines the stream."""
    if for_fingerprint:
        return [n.identity() for n in nodes if not n.places]
    return [n.describe() for n in nodes]
