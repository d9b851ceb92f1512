"""``python -m tarsy_llm``: same as the ``tarsy-llm-service`` console script."""

import sys

from .server import main

sys.exit(main())
