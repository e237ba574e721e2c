"""Training-run forensics: which records made a step, and skipping steps on resume.

``explain(loader, step)`` tells where every element of a step comes from without
reading a record; ``it.set_state(state, skip_steps=range(a, b))`` resumes with steps
[a, b) left out and every other step unchanged; ``audit(dir)`` reads the delivery
ledgers and checks that every record was delivered exactly once (docs/forensics.md).
"""

from thresher.forensics.audit import AuditReport, audit
from thresher.forensics.explain import PackedSegments, StepProvenance, explain
from thresher.loader.skips import SkipRanges

__all__ = ["AuditReport", "PackedSegments", "SkipRanges", "StepProvenance", "audit", "explain"]
