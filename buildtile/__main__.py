import sys

from buildtile.cli import main

sys.exit(main())
