"""``python -m nova_operator``."""

import sys

from nova_operator.cli import main

sys.exit(main())
