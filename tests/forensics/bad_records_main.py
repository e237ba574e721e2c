"""Run in a fresh process: restore a state of a BadSpec pipeline and print what follows.

argv: the BadSpec fields and the state as JSON, the shard index and the worker count.
Prints JSON: the batches (as lists) and the dropped records' keys.
"""

from __future__ import annotations

import json
import sys

from tests.forensics.pipelines import BadSpec


def main() -> None:
    fields, state, shard, workers = json.loads(sys.argv[1])
    fields["bad_reads"] = frozenset(fields["bad_reads"])
    fields["bad_maps"] = frozenset(fields["bad_maps"])
    it = iter(BadSpec(**fields).loader(shard, workers))
    it.set_state(state)
    batches = [b.tolist() for b in it]
    print(json.dumps({"batches": batches, "dropped": [d.record_key for d in it.skipped_records]}))


if __name__ == "__main__":
    main()
