"""``python tests/e2e/upgrade_wired_operator.py <operator flags>``: the operator with its upgrade seam wired.

Until the Database step calls the upgrade glue itself, its seam ``database.run_upgrade`` refuses every
release upgrade ("the expand/migrate/contract flow is not available yet"). This runs the unchanged
operator CLI (``nova_operator.cli.main``) in its own process, as its own ServiceAccount, after pointing
that seam at ``nova_operator.reconcilers.upgrade.run_upgrade``, exactly as the integration tier's
``wired`` fixture does (tests/integration/upgrade/conftest.py). Once the step is wired, this is the
plain operator.
"""

from __future__ import annotations

import sys


def main() -> int:
    from nova_operator.cli import main as operator_main
    from nova_operator.reconcilers import database
    from nova_operator.reconcilers import upgrade as glue

    if getattr(database, "run_upgrade", None) is not glue.run_upgrade:
        database.run_upgrade = glue.run_upgrade  # type: ignore[attr-defined]
    return int(operator_main() or 0)


if __name__ == "__main__":
    sys.exit(main())
