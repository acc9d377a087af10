"""`python -m vocalgrad.cli ...`."""

import sys

from vocalgrad.cli import main

sys.exit(main())
