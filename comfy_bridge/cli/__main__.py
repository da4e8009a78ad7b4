import sys

from comfy_bridge.cli import main

sys.exit(main())
