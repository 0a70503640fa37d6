"""Run oslo-config-validator over many config files in one process.

Runs with the Python of a nova venv (``ensure_venvs.sh``).  Each file goes through the
validator's own ``_validate`` (what ``oslo-config-validator --opt-data <yaml>
--input-file <file> --fatal-warnings`` runs); only the parse of the ~1 MB option data is
shared between files.  Prints one JSON object: ``{file: {"rc": int, "log": [lines]}}``.

Usage: <venv>/bin/python validate_many.py <nova-opt-data.yaml> <file>...
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.levelname}: {record.getMessage()}")


def main(argv: list[str]) -> int:
    from oslo_config import cfg, validator

    opt_data_path, files = argv[1], argv[2:]
    with open(opt_data_path, encoding="utf-8") as fh:
        import yaml

        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        opt_data: dict[str, Any] = yaml.load(fh, Loader=loader)
    validator.load_opt_data = lambda conf: opt_data
    log = logging.getLogger("oslo_config.validator")
    log.setLevel(logging.INFO)
    log.propagate = False
    # the oslo.config of 2025.2 and 2026.1 (10.0.0, 10.3.0) logs through the root logger, not its own
    root = logging.getLogger()
    root.setLevel(logging.INFO)
    results: dict[str, dict[str, Any]] = {}
    for path in files:
        handler = _Collect()
        log.addHandler(handler)
        root.addHandler(handler)
        conf = cfg.ConfigOpts()
        validator._register_cli_opts(conf)
        conf(["--opt-data", opt_data_path, "--input-file", path, "--fatal-warnings"], default_config_files=[])
        rc = validator._validate(conf)
        log.removeHandler(handler)
        root.removeHandler(handler)
        results[path] = {"rc": rc, "log": handler.lines}
    json.dump(results, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
