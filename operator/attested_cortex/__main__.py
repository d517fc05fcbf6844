"""``python -m attested_cortex``: the same entry point as ``cortexctl``."""

from attested_cortex.cli.main import main

if __name__ == "__main__":
    raise SystemExit(main())
