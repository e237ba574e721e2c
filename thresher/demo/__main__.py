"""``python -m thresher.demo``: runs the demo (:func:`thresher.demo.main`)."""

from thresher.demo import main

if __name__ == "__main__":
    raise SystemExit(main(prog="python -m thresher.demo"))
